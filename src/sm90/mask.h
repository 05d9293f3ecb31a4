// The visibility rule (common/mask.h) applied to the sm90 kernels' tiles and S fragments.
// Host-callable too, so the CPU tests check the tile counts and the fragment masking against an
// element-wise rule (tests/cpu/test_sm90_mask.cpp).
#pragma once

#include <cmath>

#include "common/mask.h"
#include "common/params.h"  // FLASHATTN_HOST_DEVICE, FLASHATTN_UNROLL

namespace flashattn::sm90 {

// The mask kind is a template parameter: a non-causal kernel carries no causal code. The forward
// walks key blocks [0, num_n_blocks) of a query block, last first, so the masked ones come first.
template <MaskKind Kind>
struct AttnMask {
  Mask<Kind> rule;

  // Key tiles the query rows [m0, m0 + block_m) need: Mask::n_block_range's end, in the 32/64-bit
  // form the kernels were measured with (the int64 clamps of the generic form cost registers).
  FLASHATTN_HOST_DEVICE int num_n_blocks(int m0, int block_m, int block_n) const {
    if constexpr (Mask<Kind>::kLocal) return (key_end32(m0 + block_m - 1) + block_n - 1) / block_n;
    int keys = rule.sk;
    if constexpr (Mask<Kind>::kCausal) {
      const long long lim = (long long)m0 + block_m + (rule.sk - rule.sq);  // last row's limit + 1
      keys = lim < 0 ? 0 : (lim < rule.sk ? (int)lim : rule.sk);
    }
    return (keys + block_n - 1) / block_n;
  }
  // First key tile any row >= m0 sees (a window's left edge; 0 for the other kinds).
  FLASHATTN_HOST_DEVICE int first_n_block(int m0, int block_n) const {
    if constexpr (Mask<Kind>::kLocal) return key_begin32(m0) / block_n;
    else return 0;
  }
  // Key tiles [0, result) need no mask for any row >= m0 (Mask::num_unmasked_n_blocks).
  FLASHATTN_HOST_DEVICE int num_unmasked_blocks(int m0, int block_n) const {
    long long keys = rule.sk;
    if constexpr (Mask<Kind>::kCausal) {
      const long long lim = (long long)m0 + (rule.sk - rule.sq) + 1;
      keys = lim < keys ? lim : keys;
    }
    return keys <= 0 ? 0 : static_cast<int>(keys / block_n);
  }
  // True if any element of tile n (for rows >= m0) can be masked: row m0 sees the fewest keys.
  // kLocal also needs the tile's last row (block_m): its window's left edge is the rightmost.
  FLASHATTN_HOST_DEVICE bool tile_needs_mask(int n, int m0, int block_n, int block_m = 0) const {
    if constexpr (Mask<Kind>::kLocal)
      return (n + 1) * block_n > key_end32(m0) || n * block_n < key_begin32(m0 + block_m - 1);
    const int end = (n + 1) * block_n;
    return end > rule.sk || (Mask<Kind>::kCausal && (long long)end - 1 > (long long)m0 + (rule.sk - rule.sq));
  }
  // Keys [0, result) visible to `row`: Mask::key_end in 32-bit arithmetic (the kernels keep the
  // min/max form they were measured with; int64 here cost registers, and the D=256 kernels spilled).
  FLASHATTN_HOST_DEVICE int key_end32(int row) const {
    if constexpr (Mask<Kind>::kLocal) return clamp32(row + (rule.sk - rule.sq) + rule.right + 1, 0, rule.sk);
    if constexpr (!Mask<Kind>::kCausal) return rule.sk;
#ifdef __CUDA_ARCH__
    return min(rule.sk, max(0, row + (rule.sk - rule.sq) + 1));
#else
    const int lim = row + (rule.sk - rule.sq) + 1;
    return lim < 0 ? 0 : (lim < rule.sk ? lim : rule.sk);
#endif
  }
  // kLocal: the first key `row` sees, Mask::key_begin in 32 bits (|row + sk - sq - left| stays
  // below sq + sk + 1 in the bounded window form, common/mask.h).
  FLASHATTN_HOST_DEVICE int key_begin32(int row) const {
    if constexpr (Mask<Kind>::kLocal) return clamp32(row + (rule.sk - rule.sq) - rule.left, 0, rule.sk);
    else return 0;
  }
  FLASHATTN_HOST_DEVICE static int clamp32(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }
  // Sets masked elements of the S fragment to -inf. row0 is this thread's first row (its second
  // is row0 + 8), col0 the tile's first key + 2q; element i sits at column col0 + 8(i/4) + i%2.
  template <int kSRegs>
  FLASHATTN_HOST_DEVICE void apply(float (&s)[kSRegs], int row0, int col0) const {
    if constexpr (Mask<Kind>::kLocal) {
      // Both window edges: keys [key_begin, key_end) of each row.
      const int lo0 = key_begin32(row0), lo1 = key_begin32(row0 + 8);
      const int hi0 = key_end32(row0), hi1 = key_end32(row0 + 8);
      FLASHATTN_UNROLL
      for (int i = 0; i < kSRegs; ++i) {
        const int col = col0 + 8 * (i >> 2) + (i & 1);
        const bool r1 = (i >> 1) & 1;
        if (col >= (r1 ? hi1 : hi0) || col < (r1 ? lo1 : lo0)) s[i] = -INFINITY;
      }
      return;
    }
    const int lim0 = key_end32(row0);
    const int lim1 = key_end32(row0 + 8);
    FLASHATTN_UNROLL
    for (int i = 0; i < kSRegs; ++i) {
      const int col = col0 + 8 * (i >> 2) + (i & 1);
      const int lim = ((i >> 1) & 1) ? lim1 : lim0;
      if (col >= lim) s[i] = -INFINITY;
    }
  }
  // The same, and columns below col_lo masked too (a key block loaded shifted back over keys
  // that another block counts: the varlen forward's last block); kLocal: below the window's left
  // edge as well.
  template <int kSRegs>
  FLASHATTN_HOST_DEVICE void apply(float (&s)[kSRegs], int row0, int col0, int col_lo) const {
    const int lim0 = key_end32(row0);
    const int lim1 = key_end32(row0 + 8);
    int lo0 = col_lo, lo1 = col_lo;
    if constexpr (Mask<Kind>::kLocal) {
      lo0 = max(col_lo, key_begin32(row0));
      lo1 = max(col_lo, key_begin32(row0 + 8));
    }
    FLASHATTN_UNROLL
    for (int i = 0; i < kSRegs; ++i) {
      const int col = col0 + 8 * (i >> 2) + (i & 1);
      const bool r1 = (i >> 1) & 1;
      if (col >= (r1 ? lim1 : lim0) || col < (r1 ? lo1 : lo0)) s[i] = -INFINITY;
    }
  }
};

}  // namespace flashattn::sm90
