// Host helpers shared by the arch-wrapper tests (test_arch_sm80.cu, test_arch_sm90.cu):
// compute-capability skips, fresh random 16-bit operands, copies back.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.h"

namespace flashattn::testing::archtest {

// major * 10 + minor of the current device, or -1 without a usable device.
inline int device_cc() {
  if (!have_gpu()) return -1;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return major * 10 + minor;
}

// sm_80 family code is built for every listed arch (PTX of compute_80 JITs on newer parts).
#define FLASHATTN_REQUIRE_SM80()                                                               \
  do {                                                                                         \
    const int cc_ = ::flashattn::testing::archtest::device_cc();                               \
    if (cc_ < 0) GTEST_SKIP() << "no CUDA device";                                             \
    if (cc_ < 80) GTEST_SKIP() << "needs compute capability >= 8.0, device has " << cc_;       \
  } while (0)

// sm_90a SASS (wgmma, setmaxnreg, TMA) runs on compute capability 9.0 only.
#define FLASHATTN_REQUIRE_SM90A()                                                              \
  do {                                                                                         \
    const int cc_ = ::flashattn::testing::archtest::device_cc();                               \
    if (cc_ < 0) GTEST_SKIP() << "no CUDA device";                                             \
    if (cc_ != 90) GTEST_SKIP() << "needs an sm_90a device (cc 9.0), device has " << cc_;      \
  } while (0)

// A fresh seed per run (printed with any failure), so repeated runs see different inputs.
inline uint32_t fresh_seed() { return std::random_device{}(); }

// Random bf16/f16 value with |x| in [1/64, 1] and a random sign (never zero), as raw bits.
inline uint16_t random_elem(std::mt19937& g, bool bf16) {
  std::uniform_real_distribution<float> mag(1.f / 64, 1.f);
  const float x = (g() & 1) ? mag(g) : -mag(g);
  uint16_t bits;
  if (bf16) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    std::memcpy(&bits, &h, 2);
  } else {
    const __half h = __float2half_rn(x);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}

inline std::vector<uint16_t> random_elems(std::mt19937& g, size_t n, bool bf16) {
  std::vector<uint16_t> v(n);
  for (auto& e : v) e = random_elem(g, bf16);
  return v;
}

inline double elem_value(uint16_t bits, bool bf16) {
  return half_bits_to_double(bits, bf16 ? DType::kBFloat16 : DType::kFloat16);
}

template <class T>
void upload(const DeviceBuffer& d, const std::vector<T>& h) {
  ASSERT_GE(d.bytes, h.size() * sizeof(T));
  ASSERT_EQ(cudaMemcpy(d.ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}

template <class T>
std::vector<T> download(const DeviceBuffer& d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d.ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Fills with 0xFF bytes: NaN for f32/f16/bf16, so an output the kernel never wrote shows.
inline void poison_bytes(const DeviceBuffer& d) { ASSERT_EQ(cudaMemset(d.ptr, 0xFF, d.bytes), cudaSuccess); }

// Launch error, then execution error.
#define FLASHATTN_SYNC_OK()                                   \
  do {                                                        \
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);               \
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);          \
  } while (0)

}  // namespace flashattn::testing::archtest
