// Register-allocation and register-ordering helpers (sm_90a).
#pragma once
#include <cstdint>

namespace flashattn::arch {

// Lowers this warpgroup's per-thread register limit to N (whole warpgroup must execute it).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256);
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Raises this warpgroup's per-thread register limit to N, waiting for the CTA pool.
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256);
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Compiler-only fence: pins the values of `r` at this point (no instruction). Used after
// wgmma_wait so reads/writes of async wgmma operands cannot move above the wait.
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void reg_fence(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
// One 64-bit value (e.g. a descriptor) materialised here, not recomputed at its use.
__device__ __forceinline__ void reg_fence64(uint64_t& r) { asm volatile("" : "+l"(r)::"memory"); }

// Compiler-only memory fence (no instruction): keeps the code after it (e.g. an epilogue's
// address and parameter loads) from being hoisted into the loop before it, where it would hold
// registers the loop needs (the backward's D=64 kernels spilled 768 B without it).
__device__ __forceinline__ void compiler_barrier() { asm volatile("" ::: "memory"); }

}  // namespace flashattn::arch
