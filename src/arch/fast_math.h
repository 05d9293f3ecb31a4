// Special-function-unit wrappers.
#pragma once

namespace flashattn::arch {

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

}  // namespace flashattn::arch
