// The sm90 backward kernel of packed variable-length batches (BwdConfig::kVarlen, bwd/varlen.h).
// Grid (key blocks of max_seqlen_k, kv heads, sequences): the roles of bwd/kernel.h with each
// CTA's sequence in place of its batch (the pieces they share: bwd/kernel_roles.h). A separate
// entry point, so the dense kernels keep their code; what differs from kernel.h:
//  - the CTA reads its sequence's offsets (clamped, varlen.h) and exits when its key block lies
//    past the sequence's keys (it has no dK / dV rows to write); a sequence without queries still
//    gets dK = dV = 0 from the CTAs of its key blocks;
//  - the mask rule, the query-block range and deterministic mode's turns take the sequence's
//    own lengths (causal is bottom-right per sequence);
//  - TMA boxes start at the sequence's first row of the packed tensors (batch coordinate 0);
//    rows a box takes past the sequence's end belong to the next sequence or to nothing the call
//    defines (NaN included), so they are zeroed in shared memory before any GEMM reads them: the
//    K / V rows once per CTA, the Q / dO rows of the query block crossing the end before its step;
//  - lse_log2 / dsum / the dQ accumulator are the padded packed scratch of varlen.h, and
//    deterministic mode's turn counters are per (sequence, head, query block);
//  - kLocal (the feature kernel's varlen twin): the window (from the call's max lengths, so an
//    unbounded side stays unbounded), softcap and ALiBi (the sequence's slopes) as kernel.h.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "arch/mbarrier.h"
#include "arch/named_barrier.h"
#include "arch/regs.h"
#include "arch/tma.h"
#include "common/mask.h"
#include "sm90/barriers.h"
#include "sm90/bwd/config.h"
#include "sm90/bwd/dq_writer.h"
#include "sm90/bwd/kernel_roles.h"
#include "sm90/bwd/mainloop.h"
#include "sm90/bwd/varlen.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

// Where a varlen CTA's rows lie (bwd_load_kv, bwd_load_q_block): the sequence's rows of the
// packed tensors, batch coordinate 0.
template <class Cfg>
struct BwdVarlenPlace {
  VarlenRows qs, ks;
  static constexpr int b = 0;
  __device__ __forceinline__ int k_row(int n_block) const { return ks.start + n_block * Cfg::kBlockN; }
  __device__ __forceinline__ int q_row(int m) const { return qs.start + m * Cfg::kBlockM; }
};

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNumThreads, 1)
    sm90_bwd_varlen_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                           const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmDo,
                           const BwdVarlenArgsOf<Cfg> in) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(Cfg::kVarlen);
  using namespace arch;
  constexpr bool kCausal = Cfg::kMaskKind == MaskKind::kCausal;
  // As kernel.h: deterministic causal walks the key blocks descending.
  const bool descending = kCausal && in.dq_turn != nullptr;
  int n_block = descending ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  int hk = blockIdx.y, seq = blockIdx.z;
  if constexpr (Cfg::kGroupedOrder) {
    if (in.grouped) {  // one-dimensional grid, longest key blocks of each group first (kernel.h)
      int rank_from_end;
      in.order.decode(blockIdx.x, rank_from_end, hk, seq);
      n_block = in.order.num_m_blocks - 1 - rank_from_end;
    }
  }
  // The sequence's offsets are loaded first and used after the barrier setup, whose
  // initialisation and CTA sync then run under the loads' latency (at short sequences a CTA is
  // a few microseconds long, and the dense kernel has no such round trip before its first TMA).
  const int cu_q0 = in.cu_q[seq], cu_q1 = in.cu_q[seq + 1], cu_k0 = in.cu_k[seq], cu_k1 = in.cu_k[seq + 1];
  __shared__ BwdBarriers<Cfg> bars;
  bwd_kernel_setup(bars, &tmQ, &tmK, &tmV, &tmDo);
  const VarlenRows qs = varlen_rows_of(cu_q0, cu_q1, in.sq, in.total_q);
  const VarlenRows ks = varlen_rows_of(cu_k0, cu_k1, in.sk, in.total_k);
  if (n_block * Cfg::kBlockN >= ks.len) return;  // no key of the sequence: nothing to write

  // The sequence's own problem: its lengths, and dK / dV from its first key row.
  BwdVarlenArgsOf<Cfg> args = in;
  args.sq = qs.len;
  args.sk = ks.len;
  args.dk = static_cast<Elem*>(in.dk) + static_cast<int64_t>(ks.start) * in.dk_ss;
  args.dv = static_cast<Elem*>(in.dv) + static_cast<int64_t>(ks.start) * in.dv_ss;
  // The sequence's first padded block (< num_m_blocks; 32-bit block and turn indices below: the
  // dQ writer thread has 24 registers, and sm90_supports bounds hq * num_m_blocks and num_seqs *
  // hq * turn_m_blocks by 2^31).
  const int first_block = static_cast<int>(VarlenLayout<Cfg::kBlockM>::first_block_of(cu_q0, seq, in.total_q));

  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t smem = (raw + Cfg::kSmemAlign - 1) & ~(Cfg::kSmemAlign - 1);
  uint8_t* smem_gp = smem_raw + (smem - raw);

  const Mask<Cfg::kMaskKind> rule = bwd_rule<Cfg>(args);
  const BlockRange mr = rule.m_block_range(n_block, Cfg::kBlockM, Cfg::kBlockN);
  // As kernel.h: kLocal's unmasked query blocks lie between masked ones at both ends.
  BlockRange unmasked{};
  int first_unmasked = 0;
  if constexpr (Cfg::kLocal) unmasked = rule.unmasked_m_block_range(n_block, Cfg::kBlockM, Cfg::kBlockN);
  else first_unmasked = rule.first_unmasked_m_block(n_block, Cfg::kBlockM, Cfg::kBlockN);
  const int warpgroup = threadIdx.x / 128;
  // Non-causal (not deterministic), as kernel.h: each key block of the sequence starts its walk
  // over the query blocks at its own place (wrapping around), so they do not all add into the
  // same query block's dQ at once.
  constexpr bool kWrapM = Cfg::kMaskKind == MaskKind::kNone;
  int m_first = mr.lo;
  if constexpr (kWrapM) {
    if (in.dq_turn == nullptr && !mr.empty()) {
      const int seq_n_blocks = (ks.len + Cfg::kBlockN - 1) / Cfg::kBlockN;
      m_first = mr.lo + static_cast<int>(static_cast<long long>(n_block) * (mr.hi - mr.lo) / seq_n_blocks);
    }
  }

  if (warpgroup == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 32 && !mr.empty()) {
      uint32_t phase = 0;
      PipelineState<Cfg::kStages> st;
#pragma unroll 1
      for (int h = hk * args.h_ratio; h < (hk + 1) * args.h_ratio; ++h) {
        const int chunk0 = h * args.num_m_blocks + first_block;
        const int turn0 = (seq * args.hq + h) * args.turn_m_blocks;
#pragma unroll 1
        for (int i = mr.lo, m = m_first; i < mr.hi; ++i, m = kWrapM ? (m + 1 == mr.hi ? mr.lo : m + 1) : i) {
          int turn = n_block;  // kernel.h's order, with the sequence's lengths
          if constexpr (Cfg::kLocal) turn = bwd_local_turn<Cfg>(args, m, n_block);
          if (descending) {
            const int last = m >= (args.sq - 1) / Cfg::kBlockM ? args.sq - 1 : m * Cfg::kBlockM + Cfg::kBlockM - 1;
            const int keys = min(max(last + (args.sk - args.sq) + 1, 0), args.sk);
            turn = (keys + Cfg::kBlockN - 1) / Cfg::kBlockN - 1 - n_block;
          }
          if constexpr (Cfg::kDqInStage) {
            dq_writer_block_in_stage<Cfg>(bars.dq, bars.ring, st, smem, args, chunk0 + m, turn, turn0 + m);
            st.advance();
          } else {
            dq_writer_block<Cfg>(bars.dq, phase, smem + Cfg::kSmemDq, args, chunk0 + m, turn, turn0 + m);
            phase ^= 1;
          }
        }
      }
      cp_async_bulk_wait_group0();
      return;
    }
    if (threadIdx.x != 0 || mr.empty()) return;
    bwd_load_kv<Cfg>(bars, smem, &tmK, &tmV, BwdVarlenPlace<Cfg>{qs, ks}, n_block, hk);
    PipelineState<Cfg::kStages> st;
#pragma unroll 1
    for (int h = hk * args.h_ratio; h < (hk + 1) * args.h_ratio; ++h) {
      const int64_t row_stats = (static_cast<int64_t>(h) * args.num_m_blocks + first_block) * Cfg::kBlockM;
#pragma unroll 1
      for (int i = mr.lo, m = m_first; i < mr.hi; ++i, m = kWrapM ? (m + 1 == mr.hi ? mr.lo : m + 1) : i) {
        bwd_load_q_block<Cfg>(bars, smem, st, &tmQ, &tmDo, BwdVarlenPlace<Cfg>{qs, ks}, args, h, m, row_stats);
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
    // The key block crossing the sequence's end: its rows past the end are zeroed in K and V
    // (S and dP stay finite there; the mask makes P 0), before either group's first GEMM.
    const int k_rows = args.sk - n_block * Cfg::kBlockN;
    if (k_rows < Cfg::kBlockN) {
      const int tid = threadIdx.x - 128;
      zero_tile_rows<Cfg::kBlockN, Cfg::kBoxesPerRow, 256>(smem_gp + Cfg::kSmemK, k_rows, tid);
      zero_tile_rows<Cfg::kBlockN, Cfg::kBoxesPerRow, 256>(smem_gp + Cfg::kSmemV, k_rows, tid);
      fence_proxy_async_shared_cta();
      named_barrier_sync<kBarBwdVarlenZero, 256>();
    }
    PipelineState<Cfg::kStages> st;
    uint32_t dq_phase = 0;
    int buf = 0;
#pragma unroll 1
    for (int h = hk * args.h_ratio; h < (hk + 1) * args.h_ratio; ++h) {
      const float alibi_coef = bwd_alibi_coef<Cfg>(args, seq, h);  // the sequence's slopes
#pragma unroll 1
      for (int i = mr.lo, m = m_first; i < mr.hi; ++i, m = kWrapM ? (m + 1 == mr.hi ? mr.lo : m + 1) : i) {
        const bool need_mask = Cfg::kLocal ? (m < unmasked.lo || m >= unmasked.hi) : m < first_unmasked;
        const int q_rows = args.sq - m * Cfg::kBlockM;
        if (q_rows < Cfg::kBlockM) {
          // The query block crossing the sequence's end: its rows past the end are zeroed in Q
          // and dO before the step's GEMMs read them (P is 0 on them, lse_log2 being +inf, but
          // 0 * NaN is NaN in dV += P^T dO and dK += dS^T Q). The step's own wait on the stage
          // then returns at once (the stage is not released before the step ends).
          bars.ring.wait_full(st.stage, st.phase);
          const int tid = threadIdx.x - 128;
          zero_tile_rows<Cfg::kBlockM, Cfg::kBoxesPerRow, 256>(smem_gp + Cfg::kSmemQ + st.stage * Cfg::kQBytes, q_rows,
                                                               tid);
          zero_tile_rows<Cfg::kBlockM, Cfg::kBoxesPerRow, 256>(smem_gp + Cfg::kSmemDo + st.stage * Cfg::kQBytes, q_rows,
                                                               tid);
          fence_proxy_async_shared_cta();
          named_barrier_sync<kBarBwdVarlenZero, 256>();
        }
        mma.template step<Cfg::kMaskKind>(bars.ring, st, buf, bars.dq, dq_phase, key0, m * Cfg::kBlockM, need_mask,
                                          args, alibi_coef);
        dq_phase ^= 1;
        buf ^= 1;
        st.advance();
      }
    }
    compiler_barrier();
  }
  mma.template store_dkdv<Elem>(args, 0, hk, key0);
#endif
}

}  // namespace flashattn::sm90
