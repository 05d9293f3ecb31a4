// Tile scheduler: maps a linear tile index to (m block, head, batch) and decides which tile a
// CTA runs next. Three launch modes (chosen by the launcher per call):
//  - one CTA per tile (grid = tiles): the hardware balances;
//  - static persistent (grid = #SMs, stride gridDim.x): tile i+1's Q/K/V loads overlap tile i's
//    epilogue; balanced only when all tiles cost the same (non-causal);
//  - dynamic persistent (grid = #SMs, next tile from a global atomic counter): overlap and
//    balance, for causal. The counter self-resets: the last CTA to finish zeroes it.
// The scheduler hands out work items: whole tiles, then (stream_k.h) the chunks of the split
// tail. A scheduler thread picks items and hands each piece (a tile's key-block range) to the
// loader and the consumers through a 2-slot smem ring (sched_full / sched_empty mbarriers),
// identified by a code: tile t < dp_tiles as t, piece p of chunk i as dp_tiles + 2i + p, the end
// as code_end().
#pragma once

#include "arch/mbarrier.h"
#include "sm90/kernel_args.h"
#include "sm90/mask.h"
#include "sm90/stream_k.h"

namespace flashattn::sm90 {

struct TileScheduler {
  TileOrder order;
  int* counter;  // {next item - gridDim.x, finished CTAs}; null: static striding
  StreamKPlan plan;

  __device__ __forceinline__ int num_items() const { return plan.num_items(); }
  __device__ __forceinline__ int code_end() const { return plan.dp_tiles + 2 * plan.chunks; }
  __device__ __forceinline__ int code(int item, int p) const {
    return item < plan.num_items() ? (item < plan.dp_tiles ? item : plan.dp_tiles + 2 * (item - plan.dp_tiles) + p)
                                   : code_end();
  }
  __device__ __forceinline__ int item_of_code(int code, int& p) const {
    p = code < plan.dp_tiles ? 0 : (code - plan.dp_tiles) & 1;
    return code < plan.dp_tiles ? code : plan.dp_tiles + ((code - plan.dp_tiles) >> 1);
  }
  __device__ __forceinline__ void range_of_code(int code, int& tile, int& n_lo, int& n_hi) const {
    int p;
    const int item = item_of_code(code, p);
    plan.range(item, p, tile, n_lo, n_hi);
  }
  __device__ __forceinline__ bool piece_of_code(int code, StreamKPlan::Piece& w) const {
    int p;
    const int item = item_of_code(code, p);
    return plan.piece(item, p, w);
  }
  __device__ __forceinline__ int first_code() const { return code(first(), 0); }
  // The code after `code`: its item's second piece if it has one, else the first piece of the
  // next item (claimed: one atomic per item in dynamic mode).
  __device__ __forceinline__ int next_code(int code) const {
    int p;
    const int item = item_of_code(code, p);
    if (item >= plan.dp_tiles && p == 0) {
      int tile, n_lo, n_hi;
      if (plan.range(item, 1, tile, n_lo, n_hi)) return code + 1;
    }
    return this->code(next(item), 0);
  }
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

  __device__ __forceinline__ void decode(int t, int& m_block, int& h, int& bb) const {
    order.decode(t, m_block, h, bb);
  }
};

// The k-th slot (volatile: another thread writes or reads it under the ring's barriers).
template <class Bars>
__device__ __forceinline__ void work_store(Bars& bars, uint32_t k, const WorkSlot& w) {
  volatile int* dst = reinterpret_cast<volatile int*>(&bars.work[k & 1]);
  dst[0] = w.code, dst[1] = w.m_block, dst[2] = w.h, dst[3] = w.b, dst[4] = w.n_lo, dst[5] = w.n_hi;
}
template <class Bars>
__device__ __forceinline__ WorkSlot work_load(Bars& bars, uint32_t k) {
  const volatile int* src = reinterpret_cast<const volatile int*>(&bars.work[k & 1]);
  return WorkSlot{src[0], src[1], src[2], src[3], src[4], src[5]};
}

// The scheduler thread (lane 0 of the producer group's second warp): walks this CTA's items
// (static stride or the atomic counter), splits each into its pieces and publishes every piece
// with its tile coordinates and key-block range, then an end marker. The slot of the k-th piece
// is freed by the loader and by every consumer warp once they have read it. The next piece is
// claimed only when the loader signals sched_taken for the current one: once it has issued the
// loads of all but the last Cfg::kClaimLead key blocks (producer.h), i.e. a few key blocks
// before the consumers finish the piece (V17), or when it takes the piece (kClaimLead < 0, V14-
// V16). A claim made earlier holds an item the CTA will not start for a whole tile: claiming
// two pieces ahead cost 3-5% causal (first V14 build), and the V16 trace showed one tile ahead
// leaves CTAs that took a long causal tile late with another long one claimed behind it. Doing
// this arithmetic in its own thread keeps it out of the loader's 24 registers (the loader
// computing stream-K ranges spilled).
template <class Cfg, class Bars>
__device__ __forceinline__ void schedule_work(Bars& bars, const TileScheduler& sched, const AttnMask& mask) {
#pragma unroll 1
  for (uint32_t k = 0, code = sched.first_code();; ++k) {
    arch::mbarrier_wait(arch::smem_u32(&bars.sched_empty[k & 1]), ((k >> 1) & 1) ^ 1);
    WorkSlot w{static_cast<int>(code), 0, 0, 0, 0, 0};
    if (w.code < sched.code_end()) {
      int tile = w.code;
      if constexpr (Cfg::kStreamK) sched.range_of_code(w.code, tile, w.n_lo, w.n_hi);
      sched.decode(tile, w.m_block, w.h, w.b);
      if constexpr (!Cfg::kStreamK) w.n_hi = mask.num_n_blocks(w.m_block * Cfg::kBlockM, Cfg::kBlockM, Cfg::kBlockN);
    }
    work_store(bars, k, w);
    arch::mbarrier_arrive(arch::smem_u32(&bars.sched_full[k & 1]));  // release: the slot above
    if (w.code >= sched.code_end()) break;
    // Every piece's "taken" phase is waited for (synccheck reports a phase nobody waited on).
    arch::mbarrier_wait(arch::smem_u32(&bars.sched_taken[k & 1]), (k >> 1) & 1);
    code = Cfg::kStreamK ? sched.next_code(w.code) : sched.next(w.code);
  }
  sched.finish();
}

// Consumer side: the k-th piece of this CTA. Lane 0 of a warp waits and reads, the warp gets
// the slot by shuffle (the values then stay in registers: reading the slot again after the
// mainloop, to free those registers, measured 1-3% slower). Lane 0 alone touches the slot: with
// every lane reading, then __syncwarp and lane 0's arrival (also ordered), racecheck reported
// the slot's reuse as a race.
template <class Bars>
__device__ __forceinline__ WorkSlot work_read(Bars& bars, uint32_t k) {
  WorkSlot w{};
  if ((threadIdx.x & 31) == 0) {
    arch::mbarrier_wait(arch::smem_u32(&bars.sched_full[k & 1]), (k >> 1) & 1);
    w = work_load(bars, k);
    arch::mbarrier_arrive(arch::smem_u32(&bars.sched_empty[k & 1]));
  }
  w.code = __shfl_sync(0xffffffffu, w.code, 0);
  w.m_block = __shfl_sync(0xffffffffu, w.m_block, 0);
  w.h = __shfl_sync(0xffffffffu, w.h, 0);
  w.b = __shfl_sync(0xffffffffu, w.b, 0);
  w.n_lo = __shfl_sync(0xffffffffu, w.n_lo, 0);
  w.n_hi = __shfl_sync(0xffffffffu, w.n_hi, 0);
  return w;
}

// The loader thread (alone in its warp): waits, copies the slot and frees it. It arrives on
// sched_taken[k & 1] itself (producer_tile), when the next item should be claimed.
template <class Bars>
__device__ __forceinline__ WorkSlot work_take(Bars& bars, uint32_t k) {
  arch::mbarrier_wait(arch::smem_u32(&bars.sched_full[k & 1]), (k >> 1) & 1);
  const WorkSlot w = work_load(bars, k);
  arch::mbarrier_arrive(arch::smem_u32(&bars.sched_empty[k & 1]));
  return w;
}
}  // namespace flashattn::sm90
