// The sm80 tuned-table row and the rule that picks one for a call. Pure host code with no CUDA
// dependency, so the CPU tests can check the rule without a GPU; launcher.cu holds the table
// (tuned_table.inc) and resolves rows to instantiated kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "common/params.h"
#include "sm80/fwd/config.h"

namespace flashattn::sm80 {

struct TunedRow {
  int sm;  // major*10+minor
  detail::ElemType dtype;
  int head_dim;
  bool causal;
  // The row applies when max(sq, sk) <= max_seqlen; 0 = unbounded. Different block shapes win
  // at short and long sequences (tile-quantization and occupancy vs per-tile overhead), so one
  // row per (sm, dtype, head_dim, causal) cannot serve both.
  int max_seqlen;
  int block_m, block_n, warps, frag_slice;
  bool q_in_regs, rf_double_buffer;
  bool o_col_split;  // O's columns over warp pairs (fwd/col_split.h)

  // The kernel configuration the row names: its block shape and RF knobs, every ablation
  // switch at its Sm80FwdOptions default.
  constexpr Sm80FwdOptions options() const {
    return {.head_dim = head_dim,
            .block_m = block_m,
            .block_n = block_n,
            .warps = warps,
            .frag_slice = frag_slice,
            .q_in_regs = q_in_regs,
            .rf_double_buffer = rf_double_buffer,
            .o_col_split = o_col_split};
  }
};

// A row's bound on a scale where "unbounded" (0) is the widest bucket.
constexpr int64_t tuned_bound(const TunedRow& r) {
  return r.max_seqlen == 0 ? std::numeric_limits<int64_t>::max() : int64_t(r.max_seqlen);
}

// The row for a call: among rows keyed (sm, dtype, head_dim, causal) whose bucket holds
// max(sq, sk), the one with the tightest bound for which `available(row)` holds (its kernel is
// instantiated). An unavailable row is skipped, so the call falls through to the next wider
// bucket; null when none is left (the caller then uses the head dim's default). Among rows with
// equal bounds the first listed wins. `available` is asked only about rows that would improve on
// the current pick, so one linear pass over the small table is the whole per-call cost.
template <class Available>
constexpr const TunedRow* select_tuned_row(std::span<const TunedRow> rows, int sm, detail::ElemType dtype,
                                           int head_dim, bool causal, int sq, int sk, Available&& available) {
  const int64_t len = sq > sk ? sq : sk;
  const TunedRow* best = nullptr;
  for (const TunedRow& r : rows) {
    if (r.sm != sm || r.dtype != dtype || r.head_dim != head_dim || r.causal != causal) continue;
    if (tuned_bound(r) < len) continue;
    if (best != nullptr && tuned_bound(r) >= tuned_bound(*best)) continue;
    if (available(r)) best = &r;
  }
  return best;
}

// A table is well formed when no bound is negative and no two rows share a key and a bound (the
// second would be dead, which in a hand-edited or merged table is a mistake worth a compile error).
constexpr bool tuned_rows_well_formed(std::span<const TunedRow> rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].max_seqlen < 0) return false;
    for (std::size_t j = i + 1; j < rows.size(); ++j) {
      const TunedRow &a = rows[i], &b = rows[j];
      if (a.sm == b.sm && a.dtype == b.dtype && a.head_dim == b.head_dim && a.causal == b.causal &&
          a.max_seqlen == b.max_seqlen)
        return false;
    }
  }
  return true;
}

}  // namespace flashattn::sm80
