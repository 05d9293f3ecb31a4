// Device side of the stream-K tail (stream_k.h): a split tile's pieces leave their partial
// results in the workspace, and the last warp to finish a tile's rows merges them.
#pragma once

#include <cmath>
#include <cstdint>

#include "arch/fast_math.h"
#include "sm90/fwd/mainloop.h"
#include "sm90/fwd/kernel_args.h"
#include "sm90/fwd/stream_k.h"

namespace flashattn::sm90 {

// Workspace of one launch: two counters per (split tile, consumer warp): pieces arrived and
// partials written (zero between launches: the merging warp resets both), then the slots. A
// slot holds, per consumer warp and lane, the lane's O fragment and (max0, max1, sum0, sum1) as
// float4s, lane-interleaved so every access of a warp is one coalesced 512 B run.
template <class Cfg>
struct StreamKWorkspace {
  static constexpr int kWarps = 4 * Cfg::kNumConsumerWarpgroups;
  static constexpr int kVecs = Cfg::kORegs / 4 + 1;  // float4s per lane
  static constexpr uint64_t kCounterBytes = 2 * 256 * kWarps * sizeof(int);  // split tiles <= 256
  static constexpr uint64_t kSlotBytes = uint64_t(kWarps) * kVecs * 32 * 16;
  static constexpr uint64_t bytes(int chunks) { return kCounterBytes + 2ull * chunks * kSlotBytes; }
};

// For piece `w` of a split tile, per warp (its 16 rows): the last piece to arrive merges, the
// others hand their partial results over. Returns true in the merging warp, with the merged
// O / max / sum in rO / sm for the ordinary epilogue.
//  - Arrival order comes first (an atomic), so only the pieces that are not last write their
//    partials (the last one's stays in registers), and the last waits only for pieces that
//    have already arrived, i.e. are running: no dependence on CTAs that may not be resident.
//  - The merge is deterministic: parts are folded in chunk order, starting from the first
//    chunk's values as they are (registers or memory hold the same bits). The last piece
//    writes its own partial too when it is not the first in that order.
template <class Cfg>
__device__ __forceinline__ bool stream_k_merge(const Sm90FwdArgs& args, const StreamKPlan::Piece& w,
                                               float (&rO)[Cfg::kORegs],
                                               typename Consumer<Cfg>::Softmax& sm) {
  using Ws = StreamKWorkspace<Cfg>;
  constexpr int kO4 = Cfg::kORegs / 4;
  const int warp = static_cast<int>(threadIdx.x / 32) - 4;  // consumer warps follow the producer group
  const int lane = threadIdx.x & 31;
  const int my_chunk = (w.slot >> 1);
  const int parts = w.last_chunk - w.first_chunk + 1;
  int* arrived_ctr = args.sk_counters + 2 * (w.sk_tile * Ws::kWarps + warp);
  int* written_ctr = arrived_ctr + 1;
  auto slot_base = [&](int slot) {
    return reinterpret_cast<float4*>(args.sk_partials) + (static_cast<int64_t>(slot) * Ws::kWarps + warp) * Ws::kVecs * 32 +
           lane;
  };
  auto store_partial = [&] {
    float4* dst = slot_base(w.slot);
#pragma unroll
    for (int v = 0; v < kO4; ++v) dst[v * 32] = make_float4(rO[4 * v], rO[4 * v + 1], rO[4 * v + 2], rO[4 * v + 3]);
    dst[kO4 * 32] = make_float4(sm.row_max[0], sm.row_max[1], sm.row_sum[0], sm.row_sum[1]);
  };
  int arrived = 0;
  if (lane == 0) arrived = atomicAdd(arrived_ctr, 1);
  arrived = __shfl_sync(0xffffffffu, arrived, 0);
  const bool last = arrived == parts - 1, own_first = my_chunk == w.first_chunk;
  // The last piece's partial is read back below (program order: visible) unless it comes first.
  if (!last || !own_first) store_partial();
  if (!last) {
    __threadfence();  // release: the partial before the count
    __syncwarp();
    if (lane == 0) atomicAdd(written_ctr, 1);
    return false;
  }
  if (lane == 0) {
    while (*static_cast<volatile int*>(written_ctr) < parts - 1) __nanosleep(64);
    *arrived_ctr = 0;  // nobody else touches either counter again in this launch
    *written_ctr = 0;
  }
  __syncwarp();
  __threadfence();  // acquire: the other pieces' stores (read through L2 below, never L1)

  float mx[2] = {sm.row_max[0], sm.row_max[1]};
  if (!own_first) {
    const float4* src = slot_base(args.plan.slot_of(w.first_chunk, w.sk_tile));
    const float4 ml = __ldcg(src + kO4 * 32);
    mx[0] = ml.x;
    mx[1] = ml.y;
    sm.row_sum[0] = ml.z;
    sm.row_sum[1] = ml.w;
#pragma unroll
    for (int v = 0; v < kO4; ++v) {
      const float4 x = __ldcg(src + v * 32);
      rO[4 * v] = x.x;
      rO[4 * v + 1] = x.y;
      rO[4 * v + 2] = x.z;
      rO[4 * v + 3] = x.w;
    }
  }
#pragma unroll 1
  for (int i = w.first_chunk + 1; i <= w.last_chunk; ++i) {
    const float4* src = slot_base(args.plan.slot_of(i, w.sk_tile));
    const float4 ml = __ldcg(src + kO4 * 32);
    const float pm[2] = {ml.x, ml.y}, ps[2] = {ml.z, ml.w};
    float a[2], b[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      merge_factors(mx[r], pm[r], a[r], b[r], [](float x) { return arch::ex2_approx_ftz(x); });
      sm.row_sum[r] = sm.row_sum[r] * a[r] + ps[r] * b[r];
    }
#pragma unroll
    for (int v = 0; v < kO4; ++v) {
      const float4 x = __ldcg(src + v * 32);
      // Element 4v+e belongs to row (e >> 1) & 1 (the accumulator layout of softmax.h).
      rO[4 * v] = rO[4 * v] * a[0] + x.x * b[0];
      rO[4 * v + 1] = rO[4 * v + 1] * a[0] + x.y * b[0];
      rO[4 * v + 2] = rO[4 * v + 2] * a[1] + x.z * b[1];
      rO[4 * v + 3] = rO[4 * v + 3] * a[1] + x.w * b[1];
    }
  }
  sm.row_max[0] = mx[0];
  sm.row_max[1] = mx[1];
  return true;
}

}  // namespace flashattn::sm90
