// Tile scheduler: maps a linear tile index to (m block, head, batch) and decides which tile a
// CTA runs next. Three launch modes (chosen by the launcher per call):
//  - one CTA per tile (grid = tiles): the hardware balances;
//  - static persistent (grid = #SMs, stride gridDim.x): tile i+1's Q/K/V loads overlap tile i's
//    epilogue; balanced only when all tiles cost the same (non-causal);
//  - dynamic persistent (grid = #SMs, next tile from a global atomic counter): overlap and
//    balance, for causal. The counter self-resets: the last CTA to finish zeroes it.
// The scheduler hands out work items: whole tiles, then (stream_k.h) the chunks of the split
// tail. The producer thread picks items and hands each piece (a tile's key-block range) to the
// consumers through a 2-slot smem ring (sched_full / sched_empty mbarriers) as a code:
// tile t < dp_tiles as t, piece p of chunk i as dp_tiles + 2i + p, the end as code_end().
#pragma once

#include "arch/mbarrier.h"
#include "sm90/kernel_args.h"
#include "sm90/stream_k.h"

namespace flashattn::sm90 {

struct TileScheduler {
  int num_m_blocks, hq, b;
  FastDiv div_m_blocks, div_hq;
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
  // The code after `code`: its item's second piece, else the next item's first (one atomic per
  // item in dynamic mode, issued after the item's loads: the producer runs ahead of the
  // consumers by the ring's depth, which hides the atomic's latency).
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
  // Called once per CTA by the producer after its last next(): the last CTA resets the counter
  // for the next launch on this slot (no CTA fetches after it has counted itself finished).
  __device__ __forceinline__ void finish() const {
    if (counter != nullptr && atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
      atomicExch(counter, 0);
      atomicExch(counter + 1, 0);
    }
  }

  // m is the fastest index so concurrent CTAs share one head's K/V in L2, and within a head the
  // m blocks go last-first so causal's longest tiles start first. (An m-slowest, longest-first
  // order balanced static striding better but lost L2 locality: 588 vs 668 TFLOPS at causal
  // S=16k, D=128 with one CTA per tile; see docs/VERSIONS.md (sm90 family).)
  __device__ __forceinline__ void decode(int t, int& m_block, int& h, int& bb) const {
    const int hb = div_m_blocks(t);
    m_block = num_m_blocks - 1 - (t - hb * num_m_blocks);
    bb = div_hq(hb);
    h = hb - bb * hq;
  }
};

// Producer side of the tile-index ring: publish tile `t` as the k-th index of this CTA.
template <class Bars>
__device__ __forceinline__ void sched_publish(Bars& bars, uint32_t k, int t) {
  const int slot = k & 1;
  arch::mbarrier_wait(arch::smem_u32(&bars.sched_empty[slot]), ((k >> 1) & 1) ^ 1);
  bars.tile_slot[slot] = t;
  arch::mbarrier_arrive(arch::smem_u32(&bars.sched_full[slot]));  // release: the store above
}

// Consumer side: the k-th tile index of this CTA (one arrival per warp frees the slot).
template <class Bars>
__device__ __forceinline__ int sched_read(Bars& bars, uint32_t k) {
  const int slot = k & 1;
  arch::mbarrier_wait(arch::smem_u32(&bars.sched_full[slot]), (k >> 1) & 1);
  const int t = *static_cast<volatile int*>(&bars.tile_slot[slot]);
  __syncwarp();
  if ((threadIdx.x & 31) == 0) arch::mbarrier_arrive(arch::smem_u32(&bars.sched_empty[slot]));
  return t;
}

}  // namespace flashattn::sm90
