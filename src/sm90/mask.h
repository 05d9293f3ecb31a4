// Attention mask policy of the sm90 kernels (AttnMask). Host-callable too, so the CPU tests check
// the tile counts and the fragment masking against an element-wise rule
// (tests/cpu/test_sm90_mask.cpp).
#pragma once

#include <cmath>

#include "common/params.h"  // FLASHATTN_HOST_DEVICE
// Unroll hint for the device passes only (host compilers warn on the pragma).
#ifdef __CUDA_ARCH__
#define FLASHATTN_UNROLL _Pragma("unroll")
#else
#define FLASHATTN_UNROLL
#endif

namespace flashattn::sm90 {

// Mask policy: no mask / key-length bound / bottom-right causal. Trip counts and the per-tile
// "needs masking" test live here so the mainloop stays branch-light.
struct AttnMask {
  int sq, sk;
  bool causal;

  // Number of key tiles the CTA's query rows [m0, m0+block_m) need.
  FLASHATTN_HOST_DEVICE inline int num_n_blocks(int m0, int block_m, int block_n) const {
    int keys = sk;
    if (causal) {
      const long long lim = (long long)m0 + block_m + (sk - sq);  // last row's limit + 1
      keys = lim < 0 ? 0 : (lim < sk ? (int)lim : sk);
    }
    return (keys + block_n - 1) / block_n;
  }
  // Key tiles [0, result) need no mask for any row >= m0 (tile_needs_mask is false for them).
  FLASHATTN_HOST_DEVICE inline int num_unmasked_blocks(int m0, int block_n) const {
    long long keys = sk;  // a tile is unmasked if its last key is < sk ...
    if (causal) {         // ... and, causal, visible to row m0: key <= m0 + (sk - sq)
      const long long lim = (long long)m0 + (sk - sq) + 1;
      keys = lim < keys ? lim : keys;
    }
    return keys <= 0 ? 0 : static_cast<int>(keys / block_n);
  }
  // True if any element of tile n (for rows >= m0) can be masked.
  FLASHATTN_HOST_DEVICE inline bool tile_needs_mask(int n, int m0, int block_n) const {
    const int end = (n + 1) * block_n;
    return end > sk || (causal && (long long)end - 1 > (long long)m0 + (sk - sq));
  }
  // lim clamped to [0, sk]. The device pass keeps the min/max form the kernels were measured
  // with (a ternary form changes their PTX); the host form is the same clamp.
  FLASHATTN_HOST_DEVICE inline int clamp_keys(int lim) const {
#ifdef __CUDA_ARCH__
    return min(sk, max(0, lim));
#else
    return lim < 0 ? 0 : (lim < sk ? lim : sk);
#endif
  }
  // Sets masked elements of the S fragment to -inf. row0 is this thread's first row, col0 the
  // tile's first key + 2q.
  template <int kSRegs>
  FLASHATTN_HOST_DEVICE inline void apply(float (&s)[kSRegs], int row0, int col0) const {
    const int lim0 = causal ? clamp_keys(row0 + (sk - sq) + 1) : sk;
    const int lim1 = causal ? clamp_keys(row0 + 8 + (sk - sq) + 1) : sk;
    FLASHATTN_UNROLL
    for (int i = 0; i < kSRegs; ++i) {
      const int col = col0 + 8 * (i >> 2) + (i & 1);
      const int lim = ((i >> 1) & 1) ? lim1 : lim0;
      if (col >= lim) s[i] = -INFINITY;
    }
  }
};

}  // namespace flashattn::sm90
