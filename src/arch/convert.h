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

// The bounded-max softmaxes (sm90 and sm80 step_bounded) sum P as rounded for the PV GEMM, so
// O's numerator and denominator weigh every key alike (a row's largest P is not exactly 1 there,
// as it is with a running max). 0: the unrounded sums (build-time A/B, docs/VERSIONS.md V32).
#ifndef FLASHATTN_ABL_BOUNDED_ROUNDED_SUM
#define FLASHATTN_ABL_BOUNDED_ROUNDED_SUM 1
#endif

// a + b as bf16 rounds them (as pack_f32x2<true> does), summed in fp32 (the roundings are exact
// floats): what a bf16 GEMM operand packed from a and b contributes to a row's weight.
__device__ __forceinline__ float sum_as_bf16_pair(float a, float b) {
  const uint32_t p = pack_f32x2<true>(a, b);
  return __uint_as_float(p << 16) + __uint_as_float(p & 0xffff0000u);
}

}  // namespace flashattn::arch
