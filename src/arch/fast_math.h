// Special-function-unit wrappers, and exp2 on the FMA pipe.
#pragma once

#include <cmath>
#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#if defined(__CUDACC__)
#define FLASHATTN_ARCH_HD __host__ __device__ __forceinline__
#else
#define FLASHATTN_ARCH_HD inline
#endif

namespace flashattn::arch {

#if defined(__CUDACC__)
// 2^x on MUFU.EX2, flush-to-zero; ex2(-inf) = +0 (the online softmax relies on it).
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh on MUFU.TANH (sm_75+; max relative error about 2^-11): the softcap of issue 17.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
#endif

FLASHATTN_ARCH_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}
FLASHATTN_ARCH_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// 2^x without the MUFU unit (issue 17: under softcap, MUFU.TANH and MUFU.EX2 share MUFU's 16
// lanes per SM, so a kernel can move part of its exp2 here, onto the FMA and ALU pipes).
// Plain C++, so the CPU tests run the very same arithmetic (tests/cpu/test_fast_math.cpp).
//
// x = n + f with n = rint(x), f in [-1/2, 1/2]; 2^f by a polynomial with constant term exactly
// 1, relative-error minimax (Lawson iteration on a dense grid) under that constraint; 2^n by
// adding n to the exponent field. The rounding is the 1.5 * 2^23 shifter (FADD + FADD), not
// rintf/floorf: those are FRND, a conversion-class instruction at MUFU's throughput. n sits in
// the shifter's low mantissa bits, so (bits(t) << 23) is n in the exponent field (the shifter's
// own bits fall off the top): one LEA. Instructions: FMNMX, 3 FADD, kDegree FFMA, LEA; no MUFU.
//
// Degree 3 stays within about 1e-4 relative (below bf16's and fp16's rounding of P), degree 4
// within about 3e-6 at one more FFMA; test_fast_math.cpp asserts the measured bounds.
//
// Domain: x < 128 (above, the exponent field overflows into garbage, where ex2.approx gives
// +inf; the softmax's arguments are <= its lazy-rescale threshold). x <= -127, -inf and NaN give
// exactly +0 (the clamp to -127 gives f = 0, p = 1, exponent field 0). In (-127, -126) the
// result is a subnormal below 2^-126, not always the exact one (ex2.approx.ftz gives 0 there).
// NaN gives 0 where ex2.approx gives NaN (fmaxf drops it).
//
// Why no tanh here as well: tanh saturates, and a polynomial in x over the unsaturated range
// converges slowly because of its poles at +-i*pi/2 (a degree in the tens for tanh.approx's
// accuracy), and a rational form needs a reciprocal, itself a MUFU op (or MUFU.EX2 + MUFU.RCP
// through tanh(x) = 1 - 2 / (1 + e^2x)). Moving exp2 off MUFU is the cheaper way to halve the
// pressure there.
template <int kDegree = 3>
FLASHATTN_ARCH_HD float ex2_poly(float x) {
  static_assert(kDegree == 3 || kDegree == 4, "fitted degrees: 3 and 4");
  constexpr float kShifter = 0x1.8p23f;  // 1.5 * 2^23: x + kShifter rounds x to an integer
  x = fmaxf(x, -127.f);
  const float t = x + kShifter;
  const float f = x - (t - kShifter);  // exact: both differences are representable
  float p;
  if constexpr (kDegree == 3) {
    p = fmaf(fmaf(fmaf(0x1.c2a268p-5f, f, 0x1.f00c80p-3f), f, 0x1.62f5fcp-1f), f, 1.f);
  } else {
    p = fmaf(fmaf(fmaf(fmaf(0x1.3a02f0p-7f, f, 0x1.c9fc5cp-5f), f, 0x1.ec0378p-3f), f, 0x1.62e12cp-1f), f, 1.f);
  }
  return bits_float(float_bits(p) + (float_bits(t) << 23));
}

}  // namespace flashattn::arch
