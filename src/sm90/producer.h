// Producer thread: TMA loads of Q (once per tile) and the K/V ring. K and V of a stage have separate
// full/empty barriers so QK^T(j) can start on K(j) alone (kSplitKVBarriers).
#pragma once

#include "arch/mbarrier.h"
#include "arch/tma.h"
#include "sm90/kernel_args.h"

namespace flashattn::sm90 {

// Ring position, carried across the tiles of a persistent CTA (consumers keep the same one).
struct RingState {
  int stage = 0;
  uint32_t phase = 0;
  uint32_t tiles = 0;  // tiles with work seen so far: the Q slot and its barriers' phase
};

template <class Cfg>
__device__ __forceinline__ void producer_tile(const void* tmQ, const void* tmK, const void* tmV,
                                              PipelineBarriers<Cfg::kStages>& bars, uint32_t smem, RingState& ring,
                                              int m_block, int n_lo, int n_hi, int h, int hk, int b,
                                              uint32_t taken_bar) {
  using namespace arch;
  // The scheduler claims the next piece once this one is down to its last kClaimLead key blocks
  // (scheduler.h); shorter pieces, or kClaimLead < 0, at once.
  if (Cfg::kClaimLead < 0 || n_hi - n_lo <= Cfg::kClaimLead) mbarrier_arrive(taken_bar);
  const uint32_t q_slot = ring.tiles % Cfg::kQStages;
  const uint32_t q_bar = smem_u32(&bars.q_full[q_slot]);
  // The slot's previous tile must have retired its last QK^T before its Q is overwritten.
  mbarrier_wait(smem_u32(&bars.q_empty[q_slot]), ((ring.tiles / Cfg::kQStages) & 1) ^ 1);
  mbarrier_arrive_expect_tx(q_bar, Cfg::kQBytes);
#pragma unroll
  for (int c = 0; c < Cfg::kBoxesPerRow; ++c)
    tma_load_4d(smem + Cfg::kSmemQ + q_slot * Cfg::kQBytes + c * Cfg::kQBoxBytes, tmQ, q_bar, c * Cfg::kBoxCols,
                m_block * Cfg::kBlockM, h, b);

  // Key tiles [n_lo, n_hi) are visited from the last to the first so that masked tiles come first.
  int stage = ring.stage;
  uint32_t phase = ring.phase;
#pragma unroll 1
  for (int n = n_hi - 1; n >= n_lo; --n) {
    const int row = n * Cfg::kBlockN;
    // A fresh barrier counts as "previous phase complete" for parity 1: the first lap passes.
    const uint32_t k_full = smem_u32(&bars.k_full[stage]);
    mbarrier_wait(smem_u32(&bars.k_empty[stage]), phase ^ 1);
    mbarrier_arrive_expect_tx(k_full, Cfg::kKVBytes);  // full box bytes, even past Sk
#pragma unroll
    for (int c = 0; c < Cfg::kBoxesPerRow; ++c)
      tma_load_4d(smem + Cfg::kSmemK + stage * Cfg::kKVBytes + c * Cfg::kKVBoxBytes, tmK, k_full,
                  c * Cfg::kBoxCols, row, hk, b);
    const uint32_t v_full = smem_u32(&bars.v_full[stage]);
    mbarrier_wait(smem_u32(&bars.v_empty[stage]), phase ^ 1);
    mbarrier_arrive_expect_tx(v_full, Cfg::kKVBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kBoxesPerRow; ++c)
      tma_load_4d(smem + Cfg::kSmemV + stage * Cfg::kKVBytes + c * Cfg::kKVBoxBytes, tmV, v_full,
                  c * Cfg::kBoxCols, row, hk, b);
    if (Cfg::kClaimLead >= 0 && n == n_lo + Cfg::kClaimLead) mbarrier_arrive(taken_bar);
    if (++stage == Cfg::kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  ring.stage = stage;
  ring.phase = phase;
  ++ring.tiles;
}

}  // namespace flashattn::sm90
