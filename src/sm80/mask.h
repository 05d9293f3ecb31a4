// The visibility rule (common/mask.h) applied to the sm80 mma C fragments. In m tile mt a lane
// holds rows lane/4 (elements 0, 1) and lane/4 + 8 (elements 2, 3) of every n8 tile, at columns
// 2 * (lane % 4) + {0, 1} of the tile. Both directions' S tiles use this layout. Host-callable,
// so tests/cpu checks it against Mask::visible. kLocal (windows) hides keys on both sides.
#pragma once

#include <cmath>
#include <type_traits>

#include "common/mask.h"
#include "common/params.h"  // FLASHATTN_HOST_DEVICE, FLASHATTN_UNROLL

namespace flashattn::sm80 {

// Keys [0, result) are visible to `row`: Mask::key_end in 32-bit arithmetic, unclamped below (a
// negative end hides the same keys as 0). The kernels keep this form: the generic int64 clamps
// cost registers inside the masked key blocks.
template <MaskKind Kind>
FLASHATTN_HOST_DEVICE int key_end32(const Mask<Kind>& mask, int row) {
  if constexpr (Mask<Kind>::kLocal) {
    // right <= sq (make_local_mask), so this stays below row + sk + 2.
    const int lim = row + (mask.sk - mask.sq) + mask.right + 1;
    return lim < mask.sk ? lim : mask.sk;
  }
  if constexpr (!Mask<Kind>::kCausal) return mask.sk;
  const int lim = row + (mask.sk - mask.sq) + 1;
  return lim < mask.sk ? lim : mask.sk;
}

// kLocal: the first key `row` sees is at least the result (Mask::key_begin unclamped: a
// negative begin hides the same keys as 0; left <= sk keeps it above row - sq - 1).
template <MaskKind Kind>
FLASHATTN_HOST_DEVICE int key_begin32(const Mask<Kind>& mask, int row) {
  if constexpr (Mask<Kind>::kLocal) return row + (mask.sk - mask.sq) - mask.left;
  return 0;
}

// Key blocks [0, result) hold every key some row of [m0, m0 + rows) sees (rows >= 1):
// Mask::n_block_range's end, in 32-bit arithmetic. (kLocal kernels walk Mask::n_block_range and
// unmasked_n_block_range, computed once per block: both ends of a window move.)
template <MaskKind Kind>
FLASHATTN_HOST_DEVICE int n_block_end32(const Mask<Kind>& mask, int m0, int rows, int block_n) {
  static_assert(!Mask<Kind>::kLocal, "kLocal: use Mask::n_block_range");
  const int n_end = (mask.sk + block_n - 1) / block_n;
  if constexpr (!Mask<Kind>::kCausal) return n_end;
  const int keys = m0 + rows + (mask.sk - mask.sq);  // the last row's key_end, unclamped
  const int n_causal = keys <= 0 ? 0 : (keys + block_n - 1) / block_n;
  return n_causal < n_end ? n_causal : n_end;
}

// Some element of key block n is hidden from some row >= m0 (row m0 sees the fewest keys): the
// complement of Mask::num_unmasked_n_blocks, for key blocks walked from the last down.
template <MaskKind Kind>
FLASHATTN_HOST_DEVICE bool n_block_needs_mask(const Mask<Kind>& mask, int n, int m0, int block_n) {
  static_assert(!Mask<Kind>::kLocal, "kLocal: use Mask::unmasked_n_block_range");
  const int end = (n + 1) * block_n;
  return end > mask.sk || (Mask<Kind>::kCausal && end - 1 > m0 + (mask.sk - mask.sq));
}

// The key blocks of one query block under a window (kLocal): [lo, end) hold every key a row of
// it sees (Mask::n_block_range), of which `unmasked` (Mask::unmasked_n_block_range, inside [lo,
// end)) every row sees whole.
struct LocalBlocks {
  int lo = 0;
  BlockRange unmasked;
};

// The kLocal walk of one query block's key blocks [b.lo, n_end), last to first: f(n,
// std::true_type) for the blocks that need the element-wise mask (both edges of the window and
// the partial last block), f(n, std::false_type) for b.unmasked. One loop with a (block-uniform)
// branch per block: separate loops for the two edges inline the masked iteration twice or keep
// a loop bound live through it, and either made the register-bound kernels spill.
template <class F>
FLASHATTN_HOST_DEVICE void walk_local_blocks(const LocalBlocks& b, int n_end, F&& f) {
  for (int n = n_end - 1; n >= b.lo; --n) {
    if (n >= b.unmasked.hi || n < b.unmasked.lo) {
      f(n, std::true_type{});
    } else {
      f(n, std::false_type{});
    }
  }
}

// Sets the elements of rS that `mask` hides to -inf. row0: query row of (mt 0, element 0) of this
// lane; col0: key of (n tile 0, element 0); m tiles are kRowStride rows apart.
template <int kRowStride, MaskKind Kind, int kMT, int kNS>
FLASHATTN_HOST_DEVICE void mask_fragment(const Mask<Kind>& mask, float (&rS)[kMT][kNS][4], int row0, int col0) {
  FLASHATTN_UNROLL
  for (int mt = 0; mt < kMT; ++mt) {
    FLASHATTN_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int key_end = key_end32(mask, row0 + mt * kRowStride + h * 8);
      if constexpr (Mask<Kind>::kLocal) {
        const int key_begin = key_begin32(mask, row0 + mt * kRowStride + h * 8);
        FLASHATTN_UNROLL
        for (int nt = 0; nt < kNS; ++nt) {
          FLASHATTN_UNROLL
          for (int j = 0; j < 2; ++j) {
            const int col = col0 + nt * 8 + j;
            if (col < key_begin || col >= key_end) rS[mt][nt][2 * h + j] = -INFINITY;
          }
        }
      } else {
        FLASHATTN_UNROLL
        for (int nt = 0; nt < kNS; ++nt) {
          FLASHATTN_UNROLL
          for (int j = 0; j < 2; ++j) {
            if (col0 + nt * 8 + j >= key_end) rS[mt][nt][2 * h + j] = -INFINITY;
          }
        }
      }
    }
  }
}

}  // namespace flashattn::sm80
