// Producer thread: TMA loads of Q (once per tile) and the K/V ring. K and V of a stage have separate
// full/empty barriers so QK^T(j) can start on K(j) alone (kSplitKVBarriers).
#pragma once

#include "arch/mbarrier.h"
#include "arch/tma.h"
#include "sm90/fwd/kernel_args.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

// Ring positions, carried across the tiles of a persistent CTA (consumers keep the same ones).
template <class Cfg>
struct LoaderRings {
  PipelineState<Cfg::kStages> kv;
  RingCount<Cfg::kQStages> q;  // tiles with work seen so far: the Q slot and its barriers' phase
};

template <class Cfg>
__device__ __forceinline__ void producer_tile(const void* tmQ, const void* tmK, const void* tmV,
                                              FwdBarriers<Cfg>& bars, uint32_t smem, LoaderRings<Cfg>& ring,
                                              int m_block, int n_lo, int n_hi, int h, int hk, int b,
                                              uint32_t taken_bar, int q_off = 0, int k_off = 0, int sk = 0) {
  // Varlen (b is 0: the packed tensors are one batch): rows start at the sequence's offsets, and
  // the key block that crosses the sequence's end (sk keys) is loaded ending on its last key
  // (config.h); rows before the packed start read as zeros.
  using namespace arch;
  // The scheduler claims the next piece once this one is down to its last kClaimLead key blocks
  // (scheduler.h); shorter pieces, or kClaimLead < 0, at once.
  if (Cfg::kClaimLead < 0 || n_hi - n_lo <= Cfg::kClaimLead) mbarrier_arrive(taken_bar);
  const uint32_t q_slot = ring.q.stage();
  const uint32_t q_bar = bars.q.full_bar(q_slot);
  // The slot's previous tile must have retired its last QK^T before its Q is overwritten.
  bars.q.wait_empty(ring.q);
  mbarrier_arrive_expect_tx(q_bar, Cfg::kQBytes);
#pragma unroll
  for (int c = 0; c < Cfg::kQKBoxes; ++c)
    tma_load_4d(smem + Cfg::kSmemQ + q_slot * Cfg::kQBytes + c * Cfg::kQBoxBytes, tmQ, q_bar, c * Cfg::kBoxCols,
                m_block * Cfg::kBlockM + (Cfg::kVarlen ? q_off : 0), h, b);

  // Key tiles [n_lo, n_hi) are visited from the last to the first so that masked tiles come first.
  PipelineState<Cfg::kStages> kv = ring.kv;
#pragma unroll 1
  for (int n = n_hi - 1; n >= n_lo; --n) {
    int row = n * Cfg::kBlockN;
    if constexpr (Cfg::kVarlen) row = k_off + (row + Cfg::kBlockN > sk ? sk - Cfg::kBlockN : row);
    const uint32_t k_full = bars.k.full_bar(kv.stage);
    bars.k.wait_empty(kv.stage, kv.phase);
    mbarrier_arrive_expect_tx(k_full, Cfg::kKBytes);  // full box bytes, even past Sk
#pragma unroll
    for (int c = 0; c < Cfg::kQKBoxes; ++c)
      tma_load_4d(smem + Cfg::kSmemK + kv.stage * Cfg::kKBytes + c * Cfg::kKVBoxBytes, tmK, k_full,
                  c * Cfg::kBoxCols, row, hk, b);
    const uint32_t v_full = bars.v.full_bar(kv.stage);
    bars.v.wait_empty(kv.stage, kv.phase);
    mbarrier_arrive_expect_tx(v_full, Cfg::kVBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kVBoxes; ++c)
      tma_load_4d(smem + Cfg::kSmemV + kv.stage * Cfg::kVBytes + c * Cfg::kKVBoxBytes, tmV, v_full,
                  c * Cfg::kBoxCols, row, hk, b);
    if (Cfg::kClaimLead >= 0 && n == n_lo + Cfg::kClaimLead) mbarrier_arrive(taken_bar);
    kv.advance();
  }
  ring.kv = kv;
  ++ring.q.count;
}

}  // namespace flashattn::sm90
