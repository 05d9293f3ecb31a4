// Packed variable-length batches in the sm90 backward (BwdConfig::kVarlen): the kernel's
// arguments, where a sequence sits in the packed tensors, the padded layout of the scratch, and
// the shared-memory zeroing of rows that lie outside a sequence.
//
// Offsets come from the device (no host sync). Each is clamped as the forward's scheduler clamps
// them (fwd/work_plan.h): start in [0, total], length in [0, min(max length, total - start)], so
// offsets that break the contract give wrong rows, never an access outside the tensors or the
// scratch.
//
// Scratch (lse_log2, dsum, the fp32 dQ accumulator) is packed per head with padding: sequence b's
// query block m is padded block first_block(b) + m, first_block(b) = (q0_b + b * kBlockM) /
// kBlockM. Consecutive sequences' blocks never meet (first_block(b + 1) - first_block(b) >=
// ceil(len_b / kBlockM)), and every block lies below ceil(total_q / kBlockM) + num_seqs, so the
// scratch grows with the packed rows, not with num_seqs * max_seqlen_q. (Offsets that decrease
// can make two sequences share blocks: wrong sums, still inside the scratch; deterministic mode's
// turn counters are per (sequence, head, query block), so such offsets can never make a CTA wait
// on a turn that never comes.)
#pragma once

#include <cstdint>
#include <type_traits>

#include "sm90/bwd/kernel_args.h"

namespace flashattn::sm90 {

struct Sm90BwdVarlenArgs : Sm90BwdArgs {
  // sq / sk (base): the max lengths. num_m_blocks: padded blocks per head; sq_pad = num_m_blocks
  // * kBlockM. dq_turn: (num_seqs, hq, turn_m_blocks) in deterministic mode.
  const int* cu_q = nullptr;
  const int* cu_k = nullptr;
  int total_q = 0, total_k = 0;
  int turn_m_blocks = 0;  // ceil(max_seqlen_q / kBlockM)
};
// The varlen feature kernels' (kVarlen and kLocal): the window as the call's max lengths bound it
// (an unbounded side stays unbounded for every sequence), softcap, ALiBi by sequence.
using Sm90BwdVarlenFeatureArgs = WithBwdFeatures<Sm90BwdVarlenArgs>;
template <class Cfg>
using BwdVarlenArgsOf = std::conditional_t<Cfg::kLocal, Sm90BwdVarlenFeatureArgs, Sm90BwdVarlenArgs>;

// Rows [start, start + len) of one sequence in a packed tensor of `total` rows.
struct VarlenRows {
  int start = 0, len = 0;
};
__host__ __device__ __forceinline__ VarlenRows varlen_rows(const int* cu, int b, int max_len, int total) {
  const int64_t s = min(max(static_cast<int64_t>(cu[b]), int64_t{0}), static_cast<int64_t>(total));
  const int64_t end = static_cast<int64_t>(cu[b + 1]);
  const int64_t len = max(int64_t{0}, min(min(end - s, static_cast<int64_t>(max_len)), total - s));
  return {static_cast<int>(s), static_cast<int>(len)};
}

// The padded scratch layout of the query side.
template <int kBlockM>
struct VarlenLayout {
  const int* cu_q;
  int num_seqs, max_q, total_q;

  __host__ __device__ static int64_t num_blocks(int total_q, int num_seqs) {
    return (static_cast<int64_t>(total_q) + kBlockM - 1) / kBlockM + num_seqs;
  }
  __device__ __forceinline__ int64_t first_block(int b) const {
    const int64_t q0 = min(max(static_cast<int64_t>(cu_q[b]), int64_t{0}), static_cast<int64_t>(total_q));
    return (q0 + static_cast<int64_t>(b) * kBlockM) / kBlockM;
  }
  // The sequence whose padded blocks hold block t (its rows and block index m), or -1: the last
  // sequence whose first block is at or before t, by bisection (first_block grows with b for
  // nondecreasing offsets), if t lies within its ceil(len / kBlockM) blocks.
  __device__ __forceinline__ int find(int64_t t, VarlenRows* rows, int* m) const {
    int lo = 0, hi = num_seqs;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (first_block(mid) <= t) lo = mid + 1;
      else hi = mid;
    }
    if (lo == 0) return -1;
    const int b = lo - 1;
    *rows = varlen_rows(cu_q, b, max_q, total_q);
    const int64_t mb = t - first_block(b);
    if (mb * kBlockM >= rows->len) return -1;
    *m = static_cast<int>(mb);
    return b;
  }
};

// Zeroes rows [first, kRows) of a shared-memory tile of kBoxes 64-column boxes of kRows rows,
// from `threads` threads (t is this one's index). A 128-byte swizzle permutes the 16-byte chunks
// of a row only within that row's own 128-byte line, so whole rows are zeroed without knowing it.
template <int kRows, int kBoxes, int kThreads>
__device__ __forceinline__ void zero_tile_rows(uint8_t* tile, int first, int t) {
  const int chunks = (kRows - first) * 8;  // 16-byte chunks per box
  for (int i = t; i < kBoxes * chunks; i += kThreads) {
    const int box = i / chunks, c = i - box * chunks;
    *reinterpret_cast<uint4*>(tile + box * (kRows * 128) + first * 128 + c * 16) = make_uint4(0u, 0u, 0u, 0u);
  }
}

}  // namespace flashattn::sm90
