// The sm90 forward kernel: warpgroup 0 produces (TMA), warpgroups 1..2 consume (wgmma + softmax).
// 1-D grid over tiles (m block, head, batch), one CTA per tile or persistent (scheduler.h).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "arch/mbarrier.h"
#include "arch/regs.h"
#include "arch/tma.h"
#include "sm90/config.h"
#include "sm90/consumer.h"
#include "sm90/epilogue.h"
#include "sm90/kernel_args.h"
#include "sm90/producer.h"
#include "sm90/scheduler.h"
#include "sm90/softmax.h"
#include "sm90/stream_k_merge.h"

namespace flashattn::sm90 {

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kNumThreads, 1)
    sm90_fwd_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmO,
                    const Sm90FwdArgs args) {
  // wgmma and setmaxnreg exist only under sm_90a (compute_90a); other device passes get an
  // empty body (nvcc also runs a preprocessing pass with __CUDA_ARCH__ but no feature macro).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace arch;
  __shared__ PipelineBarriers<Cfg::kStages> bars;
  extern __shared__ uint8_t smem_raw[];
  // Static smem shifts the dynamic base off the 1 KiB swizzle repeat; round it up ourselves.
  const uint32_t smem = (smem_u32(smem_raw) + Cfg::kSmemAlign - 1) & ~(Cfg::kSmemAlign - 1);

  const TileScheduler sched{args.num_m_blocks, args.hq, args.b, args.div_m_blocks, args.div_hq, args.tile_counter,
                            args.plan};
  const AttnMask mask{args.sq, args.sk, args.causal};
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    mbarrier_init(smem_u32(&bars.q_full), 1);
    mbarrier_init(smem_u32(&bars.q_empty), 4 * Cfg::kNumConsumerWarpgroups);
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(smem_u32(&bars.k_full[s]), 1);
      mbarrier_init(smem_u32(&bars.v_full[s]), 1);
      mbarrier_init(smem_u32(&bars.k_empty[s]), 4 * Cfg::kNumConsumerWarpgroups);
      mbarrier_init(smem_u32(&bars.v_empty[s]), 4 * Cfg::kNumConsumerWarpgroups);
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      mbarrier_init(smem_u32(&bars.sched_full[s]), 1);
      mbarrier_init(smem_u32(&bars.sched_empty[s]), 4 * Cfg::kNumConsumerWarpgroups);
    }
    fence_mbarrier_init();
  }
  if (threadIdx.x == 32) {
    prefetch_tensormap(&tmQ);
    prefetch_tensormap(&tmK);
    prefetch_tensormap(&tmV);
    if (Cfg::kTmaStoreEpilogue && args.o_tma) prefetch_tensormap(&tmO);
  }
  __syncthreads();

  if (warpgroup == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;
    RingState ring;
    if constexpr (Cfg::kStreamK) {
      // Codes: whole tiles, then the split chunks' pieces (scheduler.h).
#pragma unroll 1
      for (uint32_t k = 0, code = sched.first_code();; ++k) {
        sched_publish(bars, k, code);
        if (code >= sched.code_end()) break;
        int tile, n_lo, n_hi;
        sched.range_of_code(code, tile, n_lo, n_hi);
        int m_block, h, b;
        sched.decode(tile, m_block, h, b);
        if (n_hi > n_lo)
          producer_tile<Cfg>(&tmQ, &tmK, &tmV, bars, smem, ring, m_block, n_lo, n_hi, h, args.div_h_ratio(h), b);
        // The code is re-read from the ring slot the producer alone writes, so it need not stay
        // in a register across the loads (24 registers; it spilled). The next item's atomic is
        // issued only now; the producer runs ahead of the consumers by the ring's depth.
        code = sched.next_code(*static_cast<volatile int*>(&bars.tile_slot[k & 1]));
      }
    } else {
      // Whole tiles (code == tile index), the mask decides each tile's key range.
      int t = sched.first();
#pragma unroll 1
      for (uint32_t k = 0;; ++k) {
        sched_publish(bars, k, t);
        if (t >= sched.num_items()) break;
        const int t_next = sched.next(t);  // issued early: the atomic's latency hides under the loads
        int m_block, h, b;
        sched.decode(t, m_block, h, b);
        const int n_blocks = mask.num_n_blocks(m_block * Cfg::kBlockM, Cfg::kBlockM, Cfg::kBlockN);
        if (n_blocks > 0)
          producer_tile<Cfg>(&tmQ, &tmK, &tmV, bars, smem, ring, m_block, 0, n_blocks, h, args.div_h_ratio(h), b);
        t = t_next;
      }
    }
    sched.finish();
    return;
  }
  setmaxnreg_inc<Cfg::kConsumerRegs>();
  Consumer<Cfg> c{bars, smem, warpgroup - 1};
  const int t_in_wg = threadIdx.x % 128;
  const int row_in_tile = 64 * c.wg + 16 * (t_in_wg / 32) + (t_in_wg % 32) / 4;
  c.pingpong_start();
#pragma unroll 1
  for (uint32_t k = 0;; ++k) {
    const int code = sched_read(bars, k);
    if (code >= sched.code_end()) break;
    // The piece's tile and key blocks: the plan's (stream-K configs: non-causal, every tile has
    // the same blocks) or the whole tile's under the mask.
    int tile = code, n_lo = 0, n_hi = 0;
    if constexpr (Cfg::kStreamK) sched.range_of_code(code, tile, n_lo, n_hi);
    int m_block, h, b;
    sched.decode(tile, m_block, h, b);
    const int m0 = m_block * Cfg::kBlockM;
    if constexpr (!Cfg::kStreamK) n_hi = mask.num_n_blocks(m0, Cfg::kBlockM, Cfg::kBlockN);
    typename Consumer<Cfg>::Softmax sm;
    c.mainloop(mask, sm, n_lo, n_hi, m0, m0 + row_in_tile, args.scale_log2);
    // A split tile's piece: only the warp that completes the tile goes on, with the merged O.
    bool whole = true;
    if (Cfg::kStreamK && code >= args.plan.dp_tiles) {
      StreamKPlan::Piece w;
      sched.piece_of_code(code, w);
      whole = w.slot < 0;
      if (!whole && !stream_k_merge<Cfg>(args, w, c.rO, sm)) continue;
    }
    if (Cfg::kTmaStoreEpilogue && args.o_tma && whole)
      epilogue_store_tma<Cfg>(&tmO, smem, args, c.rO, sm, b, h, m0, c.wg);
    else
      epilogue_store<Cfg>(args, c.rO, sm, b, h, m0 + row_in_tile);
  }
  // The last TMA store must have read its staging buffer before the CTA's smem goes away.
  if (Cfg::kTmaStoreEpilogue && args.o_tma && t_in_wg == 0) cp_async_bulk_wait_group_read0();
  c.pingpong_finish();
#endif
}

}  // namespace flashattn::sm90
