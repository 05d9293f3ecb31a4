// Global reductions whose old value is not wanted (PTX red: fire and forget).
#pragma once

namespace flashattn::arch {

// dst[0] += a; dst[1] += b (relaxed, gpu scope, as atomicAdd). dst must be 8-B aligned.
// On sm_90+ one red.global.add.v2.f32. atomicAdd on a float2 compiles to atom.global.v2.f32,
// whose returned pair (unused) still binds two destination registers to the L2 round trip:
// ptxas keeps the SASS ATOMG, and every later write of those registers, and any fence after it,
// waits on that scoreboard. red has no destination (SASS RED).
__device__ __forceinline__ void red_add_f32x2(float* dst, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(dst), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(dst, a);  // unused result: ptxas emits RED
  atomicAdd(dst + 1, b);
#endif
}

// dst[0..3] += a, b, c, d. dst must be 16-B aligned. On sm_90+ one red.global.add.v4.f32.
__device__ __forceinline__ void red_add_f32x4(float* dst, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
  atomicAdd(dst + 2, c);
  atomicAdd(dst + 3, d);
#endif
}

}  // namespace flashattn::arch
