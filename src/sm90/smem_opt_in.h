// Host side, both directions: a kernel's dynamic shared memory above the 48 KB default needs a
// one-time opt-in per kernel; the result is kept so every later launch reports the same error.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "flashattn/flashattn.h"

namespace flashattn::sm90 {

// kKernel is the kernel itself (a template argument, so each kernel has its own once-flag).
template <auto kKernel>
Status opt_in_smem(int bytes, const char* who) {
  static std::once_flag once;
  static cudaError_t err = cudaSuccess;
  std::call_once(once, [&] { err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); });
  if (err != cudaSuccess)
    return {StatusCode::kCudaError, std::string(who) + ": cudaFuncSetAttribute: " + cudaGetErrorString(err)};
  return Status::Ok();
}

}  // namespace flashattn::sm90
