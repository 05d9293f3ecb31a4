// Named CTA barriers (bar.sync / bar.arrive). Ids are template immediates: ids in registers make
// ptxas reserve all 16 barriers. Id 0 is __syncthreads; count is a multiple of 32.
#pragma once

namespace flashattn::arch {

// Waits until `kCount` threads have arrived at barrier kId (this thread included).
template <int kId, int kCount>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kId > 0 && kId < 16 && kCount % 32 == 0);
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
}

// Signals barrier kId without waiting (counts towards kCount).
template <int kId, int kCount>
__device__ __forceinline__ void named_barrier_arrive() {
  static_assert(kId > 0 && kId < 16 && kCount % 32 == 0);
  asm volatile("bar.arrive %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
}

}  // namespace flashattn::arch
