// The sm90 backward kernel. Grid (key blocks, kv heads, batch), one CTA per key block, ascending
// key blocks: under a causal mask the first key blocks have the most query blocks, so the longest
// CTAs start first, and deterministic mode's ordered dQ reductions (key block n waits for n - 1)
// only ever wait on CTAs launched before them.
// Sliding window (MaskKind::kLocal, the feature kernel): a key block's query blocks are bounded
// on both sides and masked at both ends; deterministic mode stays ascending, each block's place
// in query block m's order counted from m's first key block (n_block_range(m).lo).
// Warpgroup 0: thread 0 loads K and V once (TMA), then per (query head of the group, query
// block) Q, dO (TMA) and the block's lse / dsum (1-D bulk copies) into a kStages ring; thread 32
// is the dQ writer (bwd/dq_writer.h). Warpgroups 1 and 2 compute (bwd/mainloop.h).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "arch/mbarrier.h"
#include "arch/regs.h"
#include "arch/tma.h"
#include "common/mask.h"
#include "sm90/bwd/config.h"
#include "sm90/bwd/dq_writer.h"
#include "sm90/bwd/kernel_args.h"
#include "sm90/bwd/kernel_roles.h"
#include "sm90/bwd/mainloop.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

// Where a dense CTA's rows lie (bwd_load_kv, bwd_load_q_block): batch b, rows from 0.
template <class Cfg>
struct BwdDensePlace {
  int b;
  __device__ __forceinline__ int k_row(int n_block) const { return n_block * Cfg::kBlockN; }
  __device__ __forceinline__ int q_row(int m) const { return m * Cfg::kBlockM; }
};

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNumThreads, 1)
    sm90_bwd_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmDo,
                    const BwdArgsOf<Cfg> args) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace arch;
  __shared__ BwdBarriers<Cfg> bars;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t smem = (raw + Cfg::kSmemAlign - 1) & ~(Cfg::kSmemAlign - 1);
  uint8_t* smem_gp = smem_raw + (smem - raw);

  // Deterministic causal: key blocks add into a query block's dQ from the last one visiting it
  // down (dq_writer.h), and launch in that order too, so a CTA only ever waits on CTAs launched
  // before it (never on one that may not be resident yet).
  constexpr bool kCausal = Cfg::kMaskKind == MaskKind::kCausal;
  const bool descending = kCausal && args.dq_turn != nullptr;
  int n_block = descending ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  int hk = blockIdx.y, b = blockIdx.z;
  if constexpr (Cfg::kGroupedOrder) {
    if (args.grouped) {  // one-dimensional grid, longest key blocks of each group first
      int rank_from_end;
      args.order.decode(blockIdx.x, rank_from_end, hk, b);
      n_block = args.order.num_m_blocks - 1 - rank_from_end;
    }
  }
  const Mask<Cfg::kMaskKind> rule = bwd_rule<Cfg>(args);
  const BlockRange mr = rule.m_block_range(n_block, Cfg::kBlockM, Cfg::kBlockN);
  // kLocal: query blocks [unmasked.lo, unmasked.hi) see every key of the block; the others of mr
  // (both ends) need the element-wise rule. Else blocks from first_unmasked on need none.
  BlockRange unmasked{};
  int first_unmasked = 0;
  if constexpr (Cfg::kLocal) unmasked = rule.unmasked_m_block_range(n_block, Cfg::kBlockM, Cfg::kBlockN);
  else first_unmasked = rule.first_unmasked_m_block(n_block, Cfg::kBlockM, Cfg::kBlockN);
  const int warpgroup = threadIdx.x / 128;
  // Non-causal (not deterministic): every key block of a pair visits every query block, and in
  // one order they would all add into the same query block's dQ at once; each starts its walk
  // at its own place instead (the walk wraps around).
  constexpr bool kWrapM = Cfg::kMaskKind == MaskKind::kNone;
  int m_first = mr.lo;
  if constexpr (kWrapM) {
    if (args.dq_turn == nullptr && !mr.empty())
      m_first = mr.lo + static_cast<int>(static_cast<long long>(n_block) * (mr.hi - mr.lo) / gridDim.x);
  }

  bwd_kernel_setup(bars, &tmQ, &tmK, &tmV, &tmDo);

  if (warpgroup == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 32 && !mr.empty()) {
      // The dQ writer walks the same blocks as the MMA warpgroups.
      uint32_t phase = 0;
      PipelineState<Cfg::kStages> st;  // kDqInStage: the ring stage each block's dQ sits in
#pragma unroll 1
      for (int h = hk * args.h_ratio; h < (hk + 1) * args.h_ratio; ++h) {
        const int64_t chunk0 = (static_cast<int64_t>(b) * args.hq + h) * args.num_m_blocks;
#pragma unroll 1
        for (int i = mr.lo, m = m_first; i < mr.hi; ++i, m = kWrapM ? (m + 1 == mr.hi ? mr.lo : m + 1) : i) {
          // This block's place in query block m's order of additions (deterministic mode):
          // descending, n_block_range(m).hi - 1 - n_block, in 32-bit arithmetic (this thread
          // has 24 registers; the 64-bit form spilled at D=256). m's last row, then the keys it
          // sees (causal: last + sk - sq + 1, clamped), in key blocks.
          int turn = n_block;
          if constexpr (Cfg::kLocal) turn = bwd_local_turn<Cfg>(args, m, n_block);
          if (descending) {
            const int last = m >= (args.sq - 1) / Cfg::kBlockM ? args.sq - 1 : m * Cfg::kBlockM + Cfg::kBlockM - 1;
            const int keys = min(max(last + (args.sk - args.sq) + 1, 0), args.sk);
            turn = (keys + Cfg::kBlockN - 1) / Cfg::kBlockN - 1 - n_block;
          }
          if constexpr (Cfg::kDqInStage) {
            dq_writer_block_in_stage<Cfg>(bars.dq, bars.ring, st, smem, args, chunk0 + m, turn);
            st.advance();
          } else {
            dq_writer_block<Cfg>(bars.dq, phase, smem + Cfg::kSmemDq, args, chunk0 + m, turn);
            phase ^= 1;
          }
        }
      }
      cp_async_bulk_wait_group0();  // the last reduction has read the staging (smem outlives it)
      return;
    }
    if (threadIdx.x != 0 || mr.empty()) return;
    bwd_load_kv<Cfg>(bars, smem, &tmK, &tmV, BwdDensePlace<Cfg>{b}, n_block, hk);
    PipelineState<Cfg::kStages> st;
#pragma unroll 1
    for (int h = hk * args.h_ratio; h < (hk + 1) * args.h_ratio; ++h) {
      const int64_t row_stats = (static_cast<int64_t>(b) * args.hq + h) * args.sq_pad;
#pragma unroll 1
      for (int i = mr.lo, m = m_first; i < mr.hi; ++i, m = kWrapM ? (m + 1 == mr.hi ? mr.lo : m + 1) : i) {
        bwd_load_q_block<Cfg>(bars, smem, st, &tmQ, &tmDo, BwdDensePlace<Cfg>{b}, args, h, m, row_stats);
        st.advance();
      }
    }
    return;
  }

  BwdMma<Cfg> mma;
  bwd_mma_init(mma, smem, smem_gp, warpgroup);
  const int key0 = n_block * Cfg::kBlockN + Cfg::kGroupKeys * mma.wg;
  if (!mr.empty()) {
    mbarrier_wait(smem_u32(&bars.kv_full), 0);
    PipelineState<Cfg::kStages> st;
    uint32_t dq_phase = 0;
    int buf = 0;  // dS^T buffer of the current block
#pragma unroll 1
    for (int h = hk * args.h_ratio; h < (hk + 1) * args.h_ratio; ++h) {
      const float alibi_coef = bwd_alibi_coef<Cfg>(args, b, h);
#pragma unroll 1
      for (int i = mr.lo, m = m_first; i < mr.hi; ++i, m = kWrapM ? (m + 1 == mr.hi ? mr.lo : m + 1) : i) {
        const bool need_mask = Cfg::kLocal ? (m < unmasked.lo || m >= unmasked.hi) : m < first_unmasked;
        mma.template step<Cfg::kMaskKind>(bars.ring, st, buf, bars.dq, dq_phase, key0, m * Cfg::kBlockM, need_mask,
                                          args, alibi_coef);
        dq_phase ^= 1;
        buf ^= 1;
        st.advance();
      }
    }
    compiler_barrier();
  }
  mma.template store_dkdv<Elem>(args, b, hk, key0);
#endif
}

}  // namespace flashattn::sm90
