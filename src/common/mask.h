// The one visibility rule of attention (host and device): which keys a query row sees, and the
// block ranges both directions iterate (the forward walks the key blocks of a query block, the
// backward the query blocks of a key block). Families apply it to their own fragment layouts;
// tests/cpu/test_mask.cpp checks every range against the element-wise rule.
#pragma once

#include <cstdint>

#include "common/params.h"  // FLASHATTN_HOST_DEVICE

namespace flashattn {

// kCausal is bottom-right aligned: query i sees key j iff j <= i + (sk - sq). kLocal is the
// sliding window (issue 17, FlashAttention 2's window_size): query i sees key j iff
//   i + (sk - sq) - left <= j <= i + (sk - sq) + right.
// Representation: a Mask<kLocal> holds left in [0, sk] and right in [0, sq], both sides always
// bounded. An unbounded side (AttnParams' -1) is stored as sk (left) or sq (right): a window
// that wide hides nothing on that side (j >= i - sq and j <= i + sk hold for every i in [0, sq),
// j in [0, sk)), and every bound below then stays within |x| <= sq + sk + 1, so 32-bit forms of
// these formulas do not overflow while sq + sk < 2^31 - 1. Causal combined with a window is
// kLocal with right = 0; a window (left unbounded, right 0) is exactly kCausal. Build a kLocal
// mask with make_local_mask(), which does these conversions; never from raw -1 values.
enum class MaskKind : int { kNone = 0, kCausal = 1, kLocal = 2 };

struct BlockRange {
  int lo = 0, hi = 0;  // blocks [lo, hi)
  FLASHATTN_HOST_DEVICE bool empty() const { return hi <= lo; }
};

namespace mask_detail {
FLASHATTN_HOST_DEVICE inline int64_t clamp64(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
}  // namespace mask_detail

template <MaskKind Kind>
struct Mask {
  static constexpr bool kCausal = Kind == MaskKind::kCausal;
  static constexpr bool kLocal = Kind == MaskKind::kLocal;
  int sq = 0, sk = 0;
  // kLocal only (see MaskKind): left in [0, sk], right in [0, sq], set by make_local_mask. The
  // other kinds carry them as unused zeros (so `Mask<K>{sq, sk}` still builds every kind).
  int left = 0, right = 0;

  // Keys [0, key_end(row)) are visible to query `row` (clamped to [0, sk]). kLocal: keys
  // [key_begin(row), key_end(row)).
  FLASHATTN_HOST_DEVICE int64_t key_end(int64_t row) const {
    if constexpr (kLocal) {
      return mask_detail::clamp64(row + (static_cast<int64_t>(sk) - sq) + right + 1, 0, sk);
    } else {
      if constexpr (!kCausal) return sk;
      const int64_t lim = row + (static_cast<int64_t>(sk) - sq) + 1;
      return lim < 0 ? 0 : (lim > sk ? sk : lim);
    }
  }
  // The first key query `row` sees (clamped to [0, sk]; 0 for kNone / kCausal). A row sees no
  // key when key_end(row) <= key_begin(row).
  FLASHATTN_HOST_DEVICE int64_t key_begin(int64_t row) const {
    if constexpr (kLocal) return mask_detail::clamp64(row + (static_cast<int64_t>(sk) - sq) - left, 0, sk);
    else return 0;
  }
  // Queries [row_begin(col), sq) see key `col` (clamped to [0, sq]). kLocal: queries
  // [row_begin(col), row_end(col)).
  FLASHATTN_HOST_DEVICE int64_t row_begin(int64_t col) const {
    if constexpr (kLocal) {
      return mask_detail::clamp64(col - (static_cast<int64_t>(sk) - sq) - right, 0, sq);
    } else {
      if constexpr (!kCausal) return 0;
      const int64_t first = col - (static_cast<int64_t>(sk) - sq);
      return first < 0 ? 0 : (first > sq ? sq : first);
    }
  }
  // One past the last query that sees key `col` (clamped to [0, sq]; sq for kNone / kCausal).
  FLASHATTN_HOST_DEVICE int64_t row_end(int64_t col) const {
    if constexpr (kLocal) return mask_detail::clamp64(col - (static_cast<int64_t>(sk) - sq) + left + 1, 0, sq);
    else return sq;
  }
  FLASHATTN_HOST_DEVICE bool visible(int64_t row, int64_t col) const {
    if constexpr (kLocal) {
      return row >= 0 && row < sq && col >= key_begin(row) && col < key_end(row);
    } else {
      return row >= 0 && row < sq && col >= 0 && col < key_end(row);
    }
  }

  // Key blocks that any row of query block m_block sees. kLocal: lo > 0 once the window's left
  // edge has passed whole key blocks (each row's keys are one interval and both of its ends
  // grow with the row, so the block's keys are [key_begin(first row), key_end(last row))).
  FLASHATTN_HOST_DEVICE BlockRange n_block_range(int m_block, int block_m, int block_n) const {
    if constexpr (kLocal) {
      const int64_t m0 = static_cast<int64_t>(m_block) * block_m;
      const int64_t m_last = (m0 + block_m < sq ? m0 + block_m : sq) - 1;
      if (m_last < m0) return {0, 0};
      const int64_t begin = key_begin(m0), end = key_end(m_last);
      const int lo = static_cast<int>(begin / block_n);
      if (end <= begin) return {lo, lo};  // no row of the block sees a key
      return {lo, static_cast<int>((end + block_n - 1) / block_n)};
    } else {
      const int64_t m0 = static_cast<int64_t>(m_block) * block_m;
      const int64_t m_last = (m0 + block_m < sq ? m0 + block_m : sq) - 1;
      if (m_last < m0) return {0, 0};
      const int64_t keys = key_end(m_last);
      return {0, static_cast<int>((keys + block_n - 1) / block_n)};
    }
  }
  // Query blocks with a row that sees some key of key block n_block. kLocal: bounded on both
  // sides, [row_begin(first key), row_end(last key)).
  FLASHATTN_HOST_DEVICE BlockRange m_block_range(int n_block, int block_m, int block_n) const {
    if constexpr (kLocal) {
      const int64_t n0 = static_cast<int64_t>(n_block) * block_n;
      if (n0 >= sk) return {0, 0};
      const int64_t n_last = (n0 + block_n < sk ? n0 + block_n : sk) - 1;
      const int64_t begin = row_begin(n0), end = row_end(n_last);
      const int lo = static_cast<int>(begin / block_m);
      if (end <= begin) return {lo, lo};  // no row sees a key of the block
      return {lo, static_cast<int>((end + block_m - 1) / block_m)};
    } else {
      const int64_t n0 = static_cast<int64_t>(n_block) * block_n;
      if (n0 >= sk) return {0, 0};
      const int64_t first_row = row_begin(n0);  // the block's first key is seen first
      const int num_m = static_cast<int>((static_cast<int64_t>(sq) + block_m - 1) / block_m);
      const int lo = static_cast<int>(first_row / block_m);
      return {lo, first_row >= sq ? lo : num_m};
    }
  }
  // Key blocks [0, result) are entirely visible to every row >= m0 (no element of them needs
  // masking); blocks from there to n_block_range's end need the element-wise rule. kLocal keeps
  // this meaning (rows m0 .. sq - 1, all of them), which is 0 whenever the last row's window has
  // left key 0 behind; its kernels want unmasked_n_block_range (one query block's rows).
  FLASHATTN_HOST_DEVICE int num_unmasked_n_blocks(int64_t m0, int block_n) const {
    if constexpr (kLocal) {
      if (m0 >= sq) return static_cast<int>(sk / block_n);  // no rows: nothing to mask
      if (key_begin(sq - 1) > 0) return 0;                 // the last row misses key 0
      return static_cast<int>(key_end(m0 < 0 ? 0 : m0) / block_n);
    } else {
      const int64_t keys = key_end(m0 < sq ? m0 : sq);
      const int64_t full = (kCausal ? keys : sk) / block_n;
      return static_cast<int>(full);
    }
  }
  // Query blocks [result, end) see every key of key block n_block (the backward's unmasked
  // blocks); blocks below it, from m_block_range's lo, need the element-wise rule. kLocal keeps
  // this meaning (every block up to the last), which is `end` whenever the last row does not see
  // key n_block's first key; its kernels want unmasked_m_block_range.
  FLASHATTN_HOST_DEVICE int first_unmasked_m_block(int n_block, int block_m, int block_n) const {
    if constexpr (kLocal) {
      const int num_m = static_cast<int>((static_cast<int64_t>(sq) + block_m - 1) / block_m);
      const int64_t n0 = static_cast<int64_t>(n_block) * block_n;
      const int64_t n_last = n0 + block_n - 1;
      if (n_last >= sk || row_end(n0) < sq) return num_m;
      return static_cast<int>((row_begin(n_last) + block_m - 1) / block_m);
    } else {
      const int64_t n_last = static_cast<int64_t>(n_block) * block_n + block_n - 1;
      if (n_last >= sk) return static_cast<int>((static_cast<int64_t>(sq) + block_m - 1) / block_m);
      const int64_t first_row = row_begin(n_last);
      return static_cast<int>((first_row + block_m - 1) / block_m);
    }
  }
  // Key blocks [lo, hi) entirely visible to every row of query block m_block (a block holding a
  // key >= sk is never counted: its padding needs the mask). Every kind; for kNone / kCausal it
  // is [0, num_unmasked_n_blocks(m0)), for kLocal the middle of n_block_range: the keys every
  // row sees are [key_begin(last row), key_end(first row)).
  FLASHATTN_HOST_DEVICE BlockRange unmasked_n_block_range(int m_block, int block_m, int block_n) const {
    const int64_t m0 = static_cast<int64_t>(m_block) * block_m;
    const int64_t m_last = (m0 + block_m < sq ? m0 + block_m : sq) - 1;
    if (m_last < m0) return {0, 0};
    const int64_t begin = key_begin(m_last), end = key_end(m0);
    const int lo = static_cast<int>((begin + block_n - 1) / block_n);
    const int hi = static_cast<int>(end / block_n);
    return {lo, hi > lo ? hi : lo};
  }
  // Query blocks [lo, hi) whose every row (below sq) sees every key of key block n_block (none if
  // the block holds a key >= sk). The rows that see all its keys are
  // [row_begin(last key), row_end(first key)).
  FLASHATTN_HOST_DEVICE BlockRange unmasked_m_block_range(int n_block, int block_m, int block_n) const {
    const int64_t n0 = static_cast<int64_t>(n_block) * block_n;
    const int64_t n_last = n0 + block_n - 1;
    if (n0 < 0 || n_last >= sk) return {0, 0};
    const int64_t begin = row_begin(n_last), end = row_end(n0);
    const int lo = static_cast<int>((begin + block_m - 1) / block_m);
    // A partial last query block is whole once its rows below sq are: end == sq admits it.
    const int hi = static_cast<int>(end >= sq ? (static_cast<int64_t>(sq) + block_m - 1) / block_m : end / block_m);
    return {lo, hi > lo ? hi : lo};
  }
};

// The kLocal mask of one (sequence) problem from AttnParams' window fields: a negative side is
// unbounded (stored as sk / sq, see MaskKind), a side wider than that is clamped to it (it hides
// nothing more), and causal intersects the window with j <= i + sk - sq, i.e. sets right to 0.
FLASHATTN_HOST_DEVICE inline Mask<MaskKind::kLocal> make_local_mask(int sq, int sk, int window_left,
                                                                  int window_right, bool causal = false) {
  Mask<MaskKind::kLocal> m;
  m.sq = sq;
  m.sk = sk;
  m.left = (window_left < 0 || window_left > sk) ? sk : window_left;
  m.right = causal ? 0 : ((window_right < 0 || window_right > sq) ? sq : window_right);
  return m;
}

}  // namespace flashattn
