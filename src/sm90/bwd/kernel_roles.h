// The pieces both sm90 backward kernels (dense bwd/kernel.h, varlen bwd/kernel_varlen.h) run
// alike: the barriers and their setup, the loader's copies (K / V once, a query block's Q, dO,
// lse and dsum; a kernel's Place type says where its rows lie) and the MMA warpgroups' start.
// Both kernels' PTX is byte-for-byte what it was with these pieces written out in each.
// Each kernel keeps its own role dispatch and (query head, query block) loops, and with them the
// ring / phase state: shared loops, or shared functions that carry that state (the dQ writer's
// step, the MMA step loop, the loader loop), compiled to reordered PTX in some instantiations
// (the ring advance's select / xor order, phi order, comparison operand order), so they stay
// written out in each kernel.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "arch/mbarrier.h"
#include "arch/regs.h"
#include "arch/tma.h"
#include "common/mask.h"
#include "sm90/bwd/config.h"
#include "sm90/bwd/kernel_args.h"
#include "sm90/bwd/mainloop.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

// The visibility rule of the call (varlen: of the CTA's sequence, its lengths in args): kLocal
// carries the window (bounded form, kernel_args.h).
template <class Cfg, class Args>
__device__ __forceinline__ Mask<Cfg::kMaskKind> bwd_rule(const Args& args) {
  if constexpr (Cfg::kLocal) return Mask<Cfg::kMaskKind>{args.sq, args.sk, args.window_left, args.window_right};
  else return Mask<Cfg::kMaskKind>{args.sq, args.sk};
}

// kLocal, deterministic mode: key block n_block's place in query block m's order of dQ
// additions, ascending from m's first key block, n_block_range(m).lo = key_begin(m's first row) /
// kBlockN (32-bit: |row + sk - sq - left| <= sq + sk, common/mask.h). Every key block from there
// to this one visits m (the visible pairs of a window are contiguous both ways) and launched
// before this CTA.
template <class Cfg, class Args>
__device__ __forceinline__ int bwd_local_turn(const Args& args, int m, int n_block) {
  const int first = m * Cfg::kBlockM + (args.sk - args.sq) - args.window_left;
  const int begin = min(max(first, 0), args.sk);
  return n_block - static_cast<int>(static_cast<unsigned>(begin) / Cfg::kBlockN);
}

// ALiBi (feature kernels): -slope * |i + sk - sq - j| in units of the score the exp2 takes (S,
// or t under softcap), as the forward adds it; slope of batch (varlen: sequence) b, query head h.
template <class Cfg, class Args>
__device__ __forceinline__ float bwd_alibi_coef(const Args& args, int b, int h) {
  if constexpr (Cfg::kLocal) {
    if (args.alibi != nullptr) return -args.alibi[b * args.alibi_bstride + h] * detail::kLog2e / args.scale_log2;
  }
  return 0.f;
}

template <class Cfg>
struct BwdBarriers {
  MbarRing<Cfg::kStages> ring;  // Q, dO, lse, dsum of one query block
  // The dQ staging: full (8 MMA warps staged), empty (writer read it); kDqInStage: one full
  // barrier per ring stage (the staging is the stage itself).
  MbarRing<Cfg::kDqInStage ? Cfg::kStages : 1> dq;
  uint64_t kv_full;             // K and V of the CTA's key block landed
};

// Both backward kernels' (dense, varlen) start: thread 0 initialises the barriers, thread 32
// prefetches the tensor maps, then the CTA syncs.
template <class Cfg>
__device__ __forceinline__ void bwd_kernel_setup(BwdBarriers<Cfg>& bars, const CUtensorMap* tmQ, const CUtensorMap* tmK,
                                                 const CUtensorMap* tmV, const CUtensorMap* tmDo) {
  using namespace arch;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(bars.ring.full_bar(s), 1);
      // kDqInStage: the dQ writer releases a stage once it has read the dQ staged over it.
      mbarrier_init(bars.ring.empty_bar(s), Cfg::kRingReleases);
    }
#pragma unroll
    for (int s = 0; s < (Cfg::kDqInStage ? Cfg::kStages : 1); ++s) {
      mbarrier_init(bars.dq.full_bar(s), 4 * Cfg::kNumMmaWarpgroups);
      mbarrier_init(bars.dq.empty_bar(s), 1);
    }
    mbarrier_init(smem_u32(&bars.kv_full), 1);
    fence_mbarrier_init();
  }
  if (threadIdx.x == 32) {
    prefetch_tensormap(tmQ);
    prefetch_tensormap(tmK);
    prefetch_tensormap(tmV);
    prefetch_tensormap(tmDo);
  }
  __syncthreads();
}

// The loader (thread 0 of warpgroup 0), once: K and V of key block n_block of kv head hk, full
// boxes (even past the keys: the kernels zero or mask what lies beyond). `place`: where the rows
// lie, k_row(n_block), q_row(m) and the batch coordinate b.
template <class Cfg, class Place>
__device__ __forceinline__ void bwd_load_kv(BwdBarriers<Cfg>& bars, uint32_t smem, const CUtensorMap* tmK,
                                            const CUtensorMap* tmV, const Place& place, int n_block, int hk) {
  using namespace arch;
  const uint32_t kv_bar = smem_u32(&bars.kv_full);
  mbarrier_arrive_expect_tx(kv_bar, 2 * Cfg::kKBytes);
  const int k_row = place.k_row(n_block);
  const int b = place.b;
#pragma unroll
  for (int c = 0; c < Cfg::kBoxesPerRow; ++c) {
    tma_load_4d(smem + Cfg::kSmemK + c * Cfg::kKBoxBytes, tmK, kv_bar, c * Cfg::kBoxCols, k_row, hk, b);
    tma_load_4d(smem + Cfg::kSmemV + c * Cfg::kKBoxBytes, tmV, kv_bar, c * Cfg::kBoxCols, k_row, hk, b);
  }
}

// The loader, per query block m of query head h: once ring stage st is free, the block's Q and
// dO rows (TMA) and its lse / dsum (1-D bulk copies) from row_stats, head h's first stats row.
template <class Cfg, class Place>
__device__ __forceinline__ void bwd_load_q_block(BwdBarriers<Cfg>& bars, uint32_t smem,
                                                 const PipelineState<Cfg::kStages>& st, const CUtensorMap* tmQ,
                                                 const CUtensorMap* tmDo, const Place& place, const Sm90BwdArgs& args,
                                                 int h, int m, int64_t row_stats) {
  using namespace arch;
  const uint32_t full = bars.ring.full_bar(st.stage);
  bars.ring.wait_empty(st.stage, st.phase);
  mbarrier_arrive_expect_tx(full, 2 * Cfg::kQBytes + 2 * Cfg::kRowStatBytes);
  const int q_row = place.q_row(m);
  const int b = place.b;
#pragma unroll
  for (int c = 0; c < Cfg::kBoxesPerRow; ++c) {
    tma_load_4d(smem + Cfg::kSmemQ + st.stage * Cfg::kQBytes + c * Cfg::kQBoxBytes, tmQ, full, c * Cfg::kBoxCols, q_row,
                h, b);
    tma_load_4d(smem + Cfg::kSmemDo + st.stage * Cfg::kQBytes + c * Cfg::kQBoxBytes, tmDo, full, c * Cfg::kBoxCols, q_row,
                h, b);
  }
  const int64_t r0 = row_stats + static_cast<int64_t>(m) * Cfg::kBlockM;
  bulk_load_1d(smem + Cfg::kSmemLse + st.stage * Cfg::kRowStatBytes, args.lse_log2 + r0, Cfg::kRowStatBytes, full);
  bulk_load_1d(smem + Cfg::kSmemDsum + st.stage * Cfg::kRowStatBytes, args.dsum + r0, Cfg::kRowStatBytes, full);
}

// An MMA warpgroup's start (warpgroups 1 and 2): its registers, its half of the key block, and
// dK = dV = 0.
template <class Cfg>
__device__ __forceinline__ void bwd_mma_init(BwdMma<Cfg>& mma, uint32_t smem, uint8_t* smem_gp, int warpgroup) {
  arch::setmaxnreg_inc<Cfg::kMmaRegs>();
  mma.smem = smem;
  mma.smem_gp = smem_gp;
  mma.wg = warpgroup - 1;
  mma.t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < Cfg::kAccRegs; ++i) {
    mma.rdK[i] = 0.f;
    mma.rdV[i] = 0.f;
  }
}

}  // namespace flashattn::sm90
