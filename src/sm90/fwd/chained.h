// Chained tiles (Cfg::kChainTiles, the window kernels): a consumer group's loop over its tiles
// in which a tile's last PV goes out in the same ping-pong turn as the next tile's first QK^T,
// and the finished tile is stored while the new tile's first softmax waits for nothing.
// Per group and tile: its key blocks' turns (the first one shared with the previous tile's last
// PV); one more turn after the last tile, or before a tile that sees no key, issues the PV left.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "sm90/fwd/config.h"
#include "sm90/fwd/epilogue.h"
#include "sm90/fwd/kernel_args.h"
#include "sm90/fwd/mainloop.h"
#include "sm90/fwd/work_plan.h"
#include "sm90/scheduler.h"

namespace flashattn::sm90 {

template <class Cfg>
__device__ __forceinline__ void consume_chained(const CUtensorMap* tmO, uint32_t smem, FwdBarriers<Cfg>& bars,
                                                const Sm90FwdArgs& args, const FwdWorkPlan<Cfg>& plan,
                                                const AttnMask<Cfg::kMaskKind>& mask, Consumer<Cfg>& c,
                                                int row_in_tile) {
  static_assert(Cfg::kChainTiles);
  using Softmax = typename Consumer<Cfg>::Softmax;
  using Slot = decltype(work_read(bars, 0u));
  // O of tile w (final in c.rO) to global memory, normalised by sm's sums.
  auto store = [&](const Slot& w, Softmax& sm) {
    const int m0 = w.m_block * Cfg::kBlockM;
    if (Cfg::kTmaStoreEpilogue && args.o_tma)
      epilogue_store_tma<Cfg>(tmO, smem, bars, c.q_slot(), args, c.rO, sm, w.b, w.h, m0, c.wg);
    else
      epilogue_store<Cfg>(args, c.rO, sm, w.b, w.h, m0 + row_in_tile);
  };
  PipelineState<Cfg::kStages> pv;  // the block whose PV is still to issue
  Slot prev{};                      // the tile that PV belongs to, and its softmax state
  Softmax sm_prev;
  bool pending = false;
#pragma unroll 1
  for (uint32_t k = 0;; ++k) {
    const Slot w = work_read(bars, k);
    if (w.code >= plan.code_end()) break;
    const int m0 = w.m_block * Cfg::kBlockM, row0 = m0 + row_in_tile;
    if constexpr (Cfg::kSoftcap) {
      if (args.alibi != nullptr)
        c.alibi_coef = -args.alibi[w.b * args.alibi_bstride + w.h] * detail::kLog2e / args.scale_log2;
    }
    c.sm = Softmax{};
    if (w.n_hi > w.n_lo) {
      if (pending) {
        c.template start_tile<true>(mask, c.sm, w.n_lo, w.n_hi, m0, row0, args.scale_log2, pv);
        store(prev, sm_prev);
      } else {
        c.template start_tile<false>(mask, c.sm, w.n_lo, w.n_hi, m0, row0, args.scale_log2, pv);
      }
      c.start_tile_done(pv);
      c.run_blocks(mask, c.sm, w.n_hi - 1, w.n_lo, m0, row0, args.scale_log2, pv);
      prev = w;
      sm_prev = c.sm;
      pending = true;
    } else {
      // No key for any row: the pending tile finishes first; this one stores zeros (lse -inf).
      if (pending) {
        c.finish_pv(pv);
        store(prev, sm_prev);
        pending = false;
      }
#pragma unroll
      for (int i = 0; i < Cfg::kORegs; ++i) c.rO[i] = 0.f;
      store(w, c.sm);
    }
  }
  if (pending) {
    c.finish_pv(pv);
    store(prev, sm_prev);
  }
}

}  // namespace flashattn::sm90
