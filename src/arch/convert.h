// Float -> 16-bit element conversions shared by the kernel families (mma/wgmma A fragments of P,
// epilogue stores of O). Plain CUDA intrinsics, no inline asm.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashattn::arch {

// (lo, hi) rounded to nearest into one 32-bit register: bfloat162 when kBf16, else half2; lo
// in the low 16 bits (the lower column / k index of an mma fragment pair).
template <bool kBf16>
__device__ __forceinline__ uint32_t pack_f32x2(float lo, float hi) {
  if constexpr (kBf16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

}  // namespace flashattn::arch
