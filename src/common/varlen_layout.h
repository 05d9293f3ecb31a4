// Where the sequences of a packed variable-length (varlen) batch sit, shared by the backward
// of both families: a sequence's rows in the packed tensors, and the padded layout of the
// backward's per-row scratch (lse_log2, dsum, the fp32 dQ accumulator).
//
// Offsets come from the device (no host sync). Each is clamped as the forward's schedulers clamp
// them: start in [0, total], length in [0, min(max length, total - start)], so offsets that break
// the contract give wrong rows, never an access outside the tensors or the scratch.
//
// Scratch rows are packed per head with padding: sequence b's query block m is padded block
// first_block(b) + m, first_block(b) = (q0_b + b * kBlockM) / kBlockM. Consecutive sequences'
// blocks never meet (first_block(b + 1) - first_block(b) >= ceil(len_b / kBlockM)), and every
// block lies below ceil(total_q / kBlockM) + num_seqs, so the scratch grows with the packed rows,
// not with num_seqs * max_seqlen_q. (Offsets that decrease can make two sequences share blocks:
// wrong sums, still inside the scratch.)
#pragma once

#include <cstdint>

namespace flashattn::detail {

// Rows [start, start + len) of one sequence in a packed tensor of `total` rows.
struct VarlenRows {
  int start = 0, len = 0;
};
// From the two offsets cu[b], cu[b + 1] (a kernel may load them early and clamp them later).
__host__ __device__ __forceinline__ VarlenRows varlen_rows_of(int cu_b, int cu_b1, int max_len, int total) {
  const int64_t s = min(max(static_cast<int64_t>(cu_b), int64_t{0}), static_cast<int64_t>(total));
  const int64_t end = static_cast<int64_t>(cu_b1);
  const int64_t len = max(int64_t{0}, min(min(end - s, static_cast<int64_t>(max_len)), total - s));
  return {static_cast<int>(s), static_cast<int>(len)};
}
__host__ __device__ __forceinline__ VarlenRows varlen_rows(const int* cu, int b, int max_len, int total) {
  return varlen_rows_of(cu[b], cu[b + 1], max_len, total);
}

// The padded scratch layout of the query side.
template <int kBlockM>
struct VarlenLayout {
  const int* cu_q;
  int num_seqs, max_q, total_q;

  __host__ __device__ static int64_t num_blocks(int total_q, int num_seqs) {
    return (static_cast<int64_t>(total_q) + kBlockM - 1) / kBlockM + num_seqs;
  }
  __device__ __forceinline__ int64_t first_block(int b) const { return first_block_of(cu_q[b], b, total_q); }
  // The same from the offset cu_q[b].
  __host__ __device__ static int64_t first_block_of(int cu_b, int b, int total_q) {
    const int64_t q0 = min(max(static_cast<int64_t>(cu_b), int64_t{0}), static_cast<int64_t>(total_q));
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

// Whether a varlen backward's scratch indices fit 32 bits (the kernels index padded blocks, rows
// and deterministic turns with int): the smallest query block (64) gives the most padded blocks,
// rows counted for a 128-row block.
inline bool varlen_bwd_scratch_fits(int total_q, int num_seqs, int hq, int max_q) {
  const int64_t blocks = VarlenLayout<64>::num_blocks(total_q, num_seqs);
  const int64_t turns = static_cast<int64_t>(num_seqs) * hq * ((static_cast<int64_t>(max_q) + 63) / 64);
  return blocks * 128 <= INT32_MAX && static_cast<int64_t>(hq) * blocks <= INT32_MAX && turns <= INT32_MAX;
}

}  // namespace flashattn::detail
