// Timestamps for kernel timelines (the sm90 trace build, FLASHATTN_SM90_TRACE).
#pragma once

#include <cstdint>

namespace flashattn::arch {

// The GPU's global nanosecond timer (same clock on every SM; resolution about 1 us on some parts,
// finer on Hopper).
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace flashattn::arch
