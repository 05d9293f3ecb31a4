// Fast base-2 exponential (MUFU.EX2): ex2.approx.ftz.f32, ~2 ulp, ex2(-inf) = +0.
#pragma once

namespace flashattn::arch {

__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashattn::arch
