// Shared helpers for GPU tests: device buffers, skip-without-GPU, host conversions.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "flashattn/flashattn.h"
#include "reference/device_check.h"

namespace flashattn::testing {

inline bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

#define FLASHATTN_REQUIRE_GPU() \
  if (!::flashattn::testing::have_gpu()) GTEST_SKIP() << "no CUDA device"

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&ptr, n ? n : 16), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

using check::half_bits_to_double;  // reference/device_check.h

// Copies a strided (B,S,H,D) device tensor of 16-bit values to a contiguous host vector.
inline std::vector<double> to_host(const TensorRef& t) {
  const int64_t n = t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3];
  int64_t span = 1;
  for (int i = 0; i < 4; ++i) span += (t.shape[i] - 1) * t.stride[i];
  std::vector<uint16_t> raw(span);
  EXPECT_EQ(cudaMemcpy(raw.data(), t.data, span * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> out(n);
  int64_t o = 0;
  for (int64_t b = 0; b < t.shape[0]; ++b)
    for (int64_t s = 0; s < t.shape[1]; ++s)
      for (int64_t h = 0; h < t.shape[2]; ++h)
        for (int64_t d = 0; d < t.shape[3]; ++d)
          out[o++] = half_bits_to_double(
              raw[b * t.stride[0] + s * t.stride[1] + h * t.stride[2] + d], t.dtype);
  return out;
}

}  // namespace flashattn::testing
