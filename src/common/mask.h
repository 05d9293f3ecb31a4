// The one visibility rule of attention (host and device): which keys a query row sees, and the
// block ranges both directions iterate (the forward walks the key blocks of a query block, the
// backward the query blocks of a key block). Families apply it to their own fragment layouts;
// tests/cpu/test_mask.cpp checks every range against the element-wise rule.
#pragma once

#include <cstdint>

#include "common/params.h"  // FLASHATTN_HOST_DEVICE

namespace flashattn {

// kCausal is bottom-right aligned: query i sees key j iff j <= i + (sk - sq). A sliding window
// (kLocal: j in [i + sk - sq - left, i + sk - sq + right]) is the next kind; the ranges below
// are written as [first, end) pairs so it only changes their bounds.
enum class MaskKind : int { kNone = 0, kCausal = 1 };

struct BlockRange {
  int lo = 0, hi = 0;  // blocks [lo, hi)
  FLASHATTN_HOST_DEVICE bool empty() const { return hi <= lo; }
};

template <MaskKind Kind>
struct Mask {
  static constexpr bool kCausal = Kind == MaskKind::kCausal;
  int sq = 0, sk = 0;

  // Keys [0, key_end(row)) are visible to query `row` (clamped to [0, sk]).
  FLASHATTN_HOST_DEVICE int64_t key_end(int64_t row) const {
    if constexpr (!kCausal) return sk;
    const int64_t lim = row + (static_cast<int64_t>(sk) - sq) + 1;
    return lim < 0 ? 0 : (lim > sk ? sk : lim);
  }
  // Queries [row_begin(col), sq) see key `col` (clamped to [0, sq]).
  FLASHATTN_HOST_DEVICE int64_t row_begin(int64_t col) const {
    if constexpr (!kCausal) return 0;
    const int64_t first = col - (static_cast<int64_t>(sk) - sq);
    return first < 0 ? 0 : (first > sq ? sq : first);
  }
  FLASHATTN_HOST_DEVICE bool visible(int64_t row, int64_t col) const {
    return row >= 0 && row < sq && col >= 0 && col < key_end(row);
  }

  // Key blocks that any row of query block m_block sees.
  FLASHATTN_HOST_DEVICE BlockRange n_block_range(int m_block, int block_m, int block_n) const {
    const int64_t m0 = static_cast<int64_t>(m_block) * block_m;
    const int64_t m_last = (m0 + block_m < sq ? m0 + block_m : sq) - 1;
    if (m_last < m0) return {0, 0};
    const int64_t keys = key_end(m_last);
    return {0, static_cast<int>((keys + block_n - 1) / block_n)};
  }
  // Query blocks with a row that sees some key of key block n_block.
  FLASHATTN_HOST_DEVICE BlockRange m_block_range(int n_block, int block_m, int block_n) const {
    const int64_t n0 = static_cast<int64_t>(n_block) * block_n;
    if (n0 >= sk) return {0, 0};
    const int64_t first_row = row_begin(n0);  // the block's first key is seen first
    const int num_m = static_cast<int>((static_cast<int64_t>(sq) + block_m - 1) / block_m);
    const int lo = static_cast<int>(first_row / block_m);
    return {lo, first_row >= sq ? lo : num_m};
  }
  // Key blocks [0, result) are entirely visible to every row >= m0 (no element of them needs
  // masking); blocks from there to n_block_range's end need the element-wise rule.
  FLASHATTN_HOST_DEVICE int num_unmasked_n_blocks(int64_t m0, int block_n) const {
    const int64_t keys = key_end(m0 < sq ? m0 : sq);
    const int64_t full = (kCausal ? keys : sk) / block_n;
    return static_cast<int>(full);
  }
  // Query blocks [result, end) see every key of key block n_block (the backward's unmasked
  // blocks); blocks below it, from m_block_range's lo, need the element-wise rule.
  FLASHATTN_HOST_DEVICE int first_unmasked_m_block(int n_block, int block_m, int block_n) const {
    const int64_t n_last = static_cast<int64_t>(n_block) * block_n + block_n - 1;
    if (n_last >= sk) return static_cast<int>((static_cast<int64_t>(sq) + block_m - 1) / block_m);
    const int64_t first_row = row_begin(n_last);
    return static_cast<int>((first_row + block_m - 1) / block_m);
  }
};

}  // namespace flashattn
