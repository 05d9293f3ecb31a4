// Persistent tile scheduling, direction-neutral. A CTA's scheduler thread claims work items
// (one CTA per item, static striding, or a global atomic counter) and publishes each piece of
// work through a 2-slot shared-memory ring (the sched mbarrier ring) to the loader and the
// consumer warps. What an item is, how it splits into pieces and what a piece's coordinates
// are is the work plan's business (the forward's: fwd/work_plan.h; the backward will bring
// one key block per item, longest first):
//   plan.first_code(), plan.code_end()      the CTA's first piece, the end marker
//   plan.describe(WorkSlot&)                fills a piece's coordinates from its code
//   plan.next_code(code)                    the piece after `code` (claims the next item)
//   plan.finish()                           once per CTA after its last claim
#pragma once

#include <cstdint>

#include "arch/mbarrier.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

// One published piece of work. code: the piece's index in the plan (>= code_end(): no more).
struct WorkSlot {
  int code, m_block, h, b, n_lo, n_hi;
  static constexpr int kWords = 6;
};
// A piece of a packed variable-length batch: its sequence's first rows in the packed q and k and
// its lengths (clamped by the plan), on top of the tile coordinates (b: the sequence).
struct VarlenWorkSlot : WorkSlot {
  int q_off, k_off, sq, sk;
  static constexpr int kWords = 10;
};

// Which item a CTA runs next. counter: {next item - gridDim.x, finished CTAs}, zero between
// launches (the last CTA to finish resets it); null: static striding by gridDim.x.
struct ItemClaims {
  int* counter;

  __device__ __forceinline__ int first() const { return blockIdx.x; }
  __device__ __forceinline__ int next(int t) const {
    return counter != nullptr ? static_cast<int>(gridDim.x) + atomicAdd(counter, 1) : t + static_cast<int>(gridDim.x);
  }
  // Called once per CTA by the scheduler thread after its last next(): the last CTA resets the
  // counter for the next launch on this slot (no CTA fetches after it has counted itself finished).
  __device__ __forceinline__ void finish() const {
    if (counter != nullptr && atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
      atomicExch(counter, 0);
      atomicExch(counter + 1, 0);
    }
  }
};

// The k-th slot (volatile: another thread writes or reads it under the ring's barriers).
// Bars::Slot is WorkSlot or VarlenWorkSlot; the varlen words follow the common six.
template <class Bars>
__device__ __forceinline__ void work_store(Bars& bars, uint32_t k, const typename Bars::Slot& w) {
  volatile int* dst = reinterpret_cast<volatile int*>(&bars.work[k & 1]);
  dst[0] = w.code, dst[1] = w.m_block, dst[2] = w.h, dst[3] = w.b, dst[4] = w.n_lo, dst[5] = w.n_hi;
  if constexpr (Bars::Slot::kWords > 6) dst[6] = w.q_off, dst[7] = w.k_off, dst[8] = w.sq, dst[9] = w.sk;
}
template <class Bars>
__device__ __forceinline__ typename Bars::Slot work_load(Bars& bars, uint32_t k) {
  const volatile int* src = reinterpret_cast<const volatile int*>(&bars.work[k & 1]);
  typename Bars::Slot w;
  w.code = src[0], w.m_block = src[1], w.h = src[2], w.b = src[3], w.n_lo = src[4], w.n_hi = src[5];
  if constexpr (Bars::Slot::kWords > 6) w.q_off = src[6], w.k_off = src[7], w.sq = src[8], w.sk = src[9];
  return w;
}

// The scheduler thread: publishes every piece of this CTA's items, then an end marker. The
// slot of the k-th piece is freed by the loader and by every consumer warp once they have read
// it. The next piece is claimed only when the loader arrives on sched_taken for the current one
// (the loader decides when: a claim made early holds an item the CTA will not start for a
// whole tile; docs/VERSIONS.md V14, V17).
template <class Plan, class Bars>
__device__ __forceinline__ void schedule_work(Bars& bars, const Plan& plan) {
#pragma unroll 1
  for (uint32_t k = 0, code = plan.first_code();; ++k) {
    bars.sched.wait_empty(RingCount<2>{k});
    typename Bars::Slot w{};
    w.code = static_cast<int>(code);
    if (w.code < plan.code_end()) plan.describe(w);
    work_store(bars, k, w);
    arch::mbarrier_arrive(bars.sched.full_bar(k & 1));  // release: the slot above
    if (w.code >= plan.code_end()) break;
    // Every piece's "taken" phase is waited for (synccheck reports a phase nobody waited on).
    arch::mbarrier_wait(arch::smem_u32(&bars.sched_taken[k & 1]), (k >> 1) & 1);
    code = plan.next_code(w.code);
  }
  plan.finish();
}

// Consumer side: the k-th piece of this CTA. Lane 0 of a warp waits and reads, the warp gets
// the slot by shuffle (the values then stay in registers: reading the slot again after the
// mainloop, to free those registers, measured slower). Lane 0 alone touches the slot: with
// every lane reading, then __syncwarp and lane 0's arrival (also ordered), racecheck reported
// the slot's reuse as a race.
template <class Bars>
__device__ __forceinline__ typename Bars::Slot work_read(Bars& bars, uint32_t k) {
  typename Bars::Slot w{};
  if ((threadIdx.x & 31) == 0) {
    bars.sched.wait_full(RingCount<2>{k});
    w = work_load(bars, k);
    arch::mbarrier_arrive(bars.sched.empty_bar(k & 1));
  }
  w.code = __shfl_sync(0xffffffffu, w.code, 0);
  w.m_block = __shfl_sync(0xffffffffu, w.m_block, 0);
  w.h = __shfl_sync(0xffffffffu, w.h, 0);
  w.b = __shfl_sync(0xffffffffu, w.b, 0);
  w.n_lo = __shfl_sync(0xffffffffu, w.n_lo, 0);
  w.n_hi = __shfl_sync(0xffffffffu, w.n_hi, 0);
  if constexpr (Bars::Slot::kWords > 6) {
    w.q_off = __shfl_sync(0xffffffffu, w.q_off, 0);
    w.k_off = __shfl_sync(0xffffffffu, w.k_off, 0);
    w.sq = __shfl_sync(0xffffffffu, w.sq, 0);
    w.sk = __shfl_sync(0xffffffffu, w.sk, 0);
  }
  return w;
}

// The loader thread (alone in its warp): waits, copies the slot and frees it. It arrives on
// sched_taken[k & 1] itself when the next item should be claimed.
template <class Bars>
__device__ __forceinline__ typename Bars::Slot work_take(Bars& bars, uint32_t k) {
  bars.sched.wait_full(RingCount<2>{k});
  const typename Bars::Slot w = work_load(bars, k);
  arch::mbarrier_arrive(bars.sched.empty_bar(k & 1));
  return w;
}

}  // namespace flashattn::sm90
