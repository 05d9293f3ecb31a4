// The sm90 forward kernel: warpgroup 0 produces (TMA), warpgroups 1..2 consume (wgmma + softmax).
// 1-D grid over tiles (m block, head, batch), one CTA per tile or persistent (scheduler.h).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "arch/mbarrier.h"
#include "arch/regs.h"
#include "arch/timer.h"
#include "arch/tma.h"
#include "sm90/fwd/config.h"
#include "sm90/fwd/mainloop.h"
#include "sm90/fwd/epilogue.h"
#include "sm90/fwd/kernel_args.h"
#include "sm90/fwd/producer.h"
#include "sm90/fwd/work_plan.h"
#include "sm90/scheduler.h"
#include "sm90/fwd/softmax.h"
#include "sm90/fwd/stream_k_merge.h"

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
  __shared__ FwdBarriers<Cfg> bars;
  extern __shared__ uint8_t smem_raw[];
  // Static smem shifts the dynamic base off the 1 KiB swizzle repeat; round it up ourselves.
  const uint32_t smem = (smem_u32(smem_raw) + Cfg::kSmemAlign - 1) & ~(Cfg::kSmemAlign - 1);

  FwdWorkPlan<Cfg> plan{args.order, ItemClaims{args.tile_counter}, args.plan,
                        AttnMask<Cfg::kMaskKind>{{args.sq, args.sk}}};
  if constexpr (Cfg::kLocal) {
    plan.mask.rule.left = args.window_left;
    plan.mask.rule.right = args.window_right;
  }
  if constexpr (Cfg::kVarlen) {
    plan.cu_q = args.cu_q;
    plan.cu_k = args.cu_k;
    plan.total_q = args.total_q;
    plan.total_k = args.total_k;
  }
  const AttnMask<Cfg::kMaskKind> mask = plan.mask;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < Cfg::kQStages; ++s) {
      mbarrier_init(bars.q.full_bar(s), 1);
      mbarrier_init(bars.q.empty_bar(s), 4 * Cfg::kNumConsumerWarpgroups);
    }
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(bars.k.full_bar(s), 1);
      mbarrier_init(bars.v.full_bar(s), 1);
      mbarrier_init(bars.k.empty_bar(s), 4 * Cfg::kNumConsumerWarpgroups);
      mbarrier_init(bars.v.empty_bar(s), 4 * Cfg::kNumConsumerWarpgroups);
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      mbarrier_init(bars.sched.full_bar(s), 1);
      mbarrier_init(bars.sched.empty_bar(s), 4 * Cfg::kNumConsumerWarpgroups + 1);  // + the loader
      mbarrier_init(smem_u32(&bars.sched_taken[s]), 1);
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
    // Producer group: thread 0 loads (TMA), thread 32 schedules (scheduler.h); the rest leave.
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 32) schedule_work(bars, plan);
    if (threadIdx.x != 0) return;
    LoaderRings<Cfg> ring;
#pragma unroll 1
    for (uint32_t k = 0;; ++k) {
      const auto w = work_take(bars, k);  // the loader frees the slot at once
      if (w.code >= plan.code_end()) break;
      const uint32_t taken = smem_u32(&bars.sched_taken[k & 1]);
      if (w.n_hi > w.n_lo) {
        if constexpr (Cfg::kVarlen)  // the packed tensors are one batch
          producer_tile<Cfg>(&tmQ, &tmK, &tmV, bars, smem, ring, w.m_block, w.n_lo, w.n_hi, w.h,
                             args.div_h_ratio(w.h), 0, taken, w.q_off, w.k_off, w.sk);
        else
          producer_tile<Cfg>(&tmQ, &tmK, &tmV, bars, smem, ring, w.m_block, w.n_lo, w.n_hi, w.h,
                             args.div_h_ratio(w.h), w.b, taken);
      } else
        mbarrier_arrive(taken);  // nothing to load: the next piece may be claimed now
    }
    return;
  }
  setmaxnreg_inc<Cfg::kConsumerRegs>();
  Consumer<Cfg> c{bars, smem, warpgroup - 1};
  if constexpr (Cfg::kSoftcap) c.softcap_scale = args.softcap_scale;
  const int t_in_wg = threadIdx.x % 128;
  const int row_in_tile = 64 * c.wg + 16 * (t_in_wg / 32) + (t_in_wg % 32) / 4;
  c.pingpong_start();
#pragma unroll 1
  for (uint32_t k = 0;; ++k) {
    const auto w = work_read(bars, k);
    if (w.code >= plan.code_end()) break;
#if FLASHATTN_SM90_TRACE
    const uint64_t t_start = globaltimer_ns();
#endif
    const int m0 = w.m_block * Cfg::kBlockM;
    c.sm = typename Consumer<Cfg>::Softmax{};
    if constexpr (Cfg::kSoftcap) {
      // In units of S: the softmax takes S * scale_log2 to exp2, ALiBi's bias is natural-log.
      if (args.alibi != nullptr)
        c.alibi_coef = -args.alibi[w.b * args.alibi_bstride + w.h] * detail::kLog2e / args.scale_log2;
    }
    // Whole tiles start at key block 0: a literal keeps the mainloop's bounds as tight as V13's.
    if constexpr (Cfg::kVarlen)  // the sequence's own lengths (and the window's left edge)
      c.mainloop(plan.seq_mask(w.sq, w.sk), c.sm, Cfg::kLocal ? w.n_lo : 0, w.n_hi, m0, m0 + row_in_tile,
                 args.scale_log2);
    else
      c.mainloop(mask, c.sm, (Cfg::kStreamK || Cfg::kLocal) ? w.n_lo : 0, w.n_hi, m0, m0 + row_in_tile, args.scale_log2);
#if FLASHATTN_SM90_TRACE
    const uint64_t t_main = globaltimer_ns();
#endif
    // kTmaStoreInQ: the mainloop kept this tile's Q slot (if it ran: causal rows may see no key);
    // the TMA epilogue frees it once its store has read it, any other path right here.
    const bool had_q = w.n_hi > w.n_lo;
    // A split tile's piece: only the warp that completes the tile's rows goes on, with the merged O.
    bool whole = true, store = true;
    if (Cfg::kStreamK && w.code >= args.plan.dp_tiles) {
      StreamKPlan::Piece p;
      plan.piece_of_code(w.code, p);
      whole = p.slot < 0;
      if (!whole) {
        if (Cfg::kTmaStoreInQ && had_q) c.release_q_slot();
        store = stream_k_merge<Cfg>(args, p, c.rO, c.sm);
      }
    }
    // Varlen: the TMA store only for tiles inside their sequence (it would write the next one's rows).
    bool o_tma = args.o_tma;
    if constexpr (Cfg::kVarlen) o_tma = o_tma && m0 + Cfg::kBlockM <= w.sq;
    const bool tma_epilogue = Cfg::kTmaStoreEpilogue && o_tma && whole && (!Cfg::kTmaStoreInQ || had_q);
    if (Cfg::kTmaStoreInQ && whole && had_q && !o_tma) c.release_q_slot();
    if (store) {
      if constexpr (Cfg::kVarlen) {
        if (tma_epilogue)
          epilogue_store_tma<Cfg>(&tmO, smem, bars, c.q_slot(), args, c.rO, c.sm, 0, w.h, m0, c.wg, w.q_off);
        else
          epilogue_store<Cfg>(args, c.rO, c.sm, 0, w.h, m0 + row_in_tile, w.q_off, w.sq);
      } else {
        if (tma_epilogue)
          epilogue_store_tma<Cfg>(&tmO, smem, bars, c.q_slot(), args, c.rO, c.sm, w.b, w.h, m0, c.wg);
        else
          epilogue_store<Cfg>(args, c.rO, c.sm, w.b, w.h, m0 + row_in_tile);
      }
    }
#if FLASHATTN_SM90_TRACE
    if (threadIdx.x == 128 && k < kTraceEvents) {
      unsigned long long* e = args.trace + (static_cast<uint64_t>(blockIdx.x) * kTraceEvents + k) * 4;
      e[0] = static_cast<unsigned long long>(w.code) | (static_cast<unsigned long long>(store) << 32);
      e[1] = t_start;
      e[2] = t_main;
      e[3] = globaltimer_ns();
    }
#endif
  }
  // The last TMA store must have read its staging buffer before the CTA's smem goes away.
  if (Cfg::kTmaStoreEpilogue && args.o_tma && t_in_wg == 0) cp_async_bulk_wait_group_read0();
  c.pingpong_finish();
#endif
}

}  // namespace flashattn::sm90
