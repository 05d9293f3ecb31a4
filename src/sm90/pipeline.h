// Pipeline rings of the sm90 kernels: N slots, each with a "full" mbarrier (the producer's data
// landed) and an "empty" one (every consumer is done with it), walked with a PipelineState
// (slot + the parity of the lap). The forward's K, V, Q-slot and work rings and the backward's
// rings use the same type, so the phase bookkeeping is written once.
#pragma once

#include <cstdint>

#include "arch/mbarrier.h"

namespace flashattn::sm90 {

// Position in a ring of kStages slots. A fresh mbarrier counts as "previous phase complete" for
// parity 1, so a producer waiting on empty with phase ^ 1 passes on the first lap.
template <int kStages>
struct PipelineState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// A ring position kept as a running count (lap * N + slot): for small power-of-two rings whose
// count is itself useful (the Q slots: tiles seen; the work ring: pieces seen).
template <int N>
struct RingCount {
  uint32_t count = 0;
  __device__ __forceinline__ uint32_t stage() const { return count % N; }
  __device__ __forceinline__ uint32_t phase() const { return (count / N) & 1; }
};

// The mbarriers of an N-slot ring (static smem, 8-byte aligned).
template <int N>
struct MbarRing {
  uint64_t full[N], empty[N];

  template <class I>
  __device__ __forceinline__ uint32_t full_bar(I s) { return arch::smem_u32(&full[s]); }
  template <class I>
  __device__ __forceinline__ uint32_t empty_bar(I s) { return arch::smem_u32(&empty[s]); }
  // Consumer: slot s holds the data of lap `phase`.
  template <class I>
  __device__ __forceinline__ void wait_full(I s, uint32_t phase) { arch::mbarrier_wait(full_bar(s), phase); }
  // Producer: every consumer released slot s in the previous lap.
  template <class I>
  __device__ __forceinline__ void wait_empty(I s, uint32_t phase) { arch::mbarrier_wait(empty_bar(s), phase ^ 1); }
  // The same for a ring kept as a count (the slot's address is formed before the parity).
  template <int M>
  __device__ __forceinline__ void wait_full(const RingCount<M>& r) {
    const uint32_t bar = full_bar(r.stage());
    arch::mbarrier_wait(bar, r.phase());
  }
  template <int M>
  __device__ __forceinline__ void wait_empty(const RingCount<M>& r) {
    const uint32_t bar = empty_bar(r.stage());
    arch::mbarrier_wait(bar, r.phase() ^ 1);
  }
  // Consumer warp: one arrival from lane 0 (empty barriers count warps).
  template <class I>
  __device__ __forceinline__ void release_warp(I s) {
    if ((threadIdx.x & 31) == 0) arch::mbarrier_arrive(empty_bar(s));
  }
  // Every calling thread arrives (the empty barrier counts threads): for slots whose data the
  // consumers read with plain loads, so each thread's reads are ordered before its own arrive
  // (an elected lane after __syncwarp is the same on the hardware, but ptxas may drop a
  // __syncwarp it proves redundant, and compute-sanitizer's racecheck then sees no order).
  template <class I>
  __device__ __forceinline__ void release_thread(I s) {
    arch::mbarrier_arrive(empty_bar(s));
  }
};

}  // namespace flashattn::sm90
