// The sm90 kernels' mask policy (src/sm90/mask.h over common/mask.h) against the element-wise rule: key c is
// visible to query row r iff c < Sk and, causal (bottom-right aligned), c <= r + Sk - Sq.
// Checks the per-tile trip count, the "needs a mask" test, the split point between masked and
// unmasked key tiles (V13's two loops rely on every tile below it being fully visible), and the
// fragment masking of apply() for every thread of a consumer group.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sm90/mask.h"

namespace {

using flashattn::MaskKind;
using flashattn::sm90::AttnMask;

// The rule written out independently of common/mask.h.
template <MaskKind K>
bool visible(const AttnMask<K>& m, long long r, long long c) {
  return c < m.rule.sk && (K != MaskKind::kCausal || c <= r + m.rule.sk - m.rule.sq);
}

// Runs body(mask, causal) for a non-causal and a causal mask of one shape.
template <class F>
void both_kinds(int sq, int sk, F&& body) {
  body(AttnMask<MaskKind::kNone>{{sq, sk}}, false);
  body(AttnMask<MaskKind::kCausal>{{sq, sk}}, true);
}

struct Shape {
  int sq, sk;
};
const std::vector<Shape> kShapes = {{1, 1},      {17, 17},     {113, 1000}, {1000, 113}, {128, 128},
                                    {2048, 2048}, {4097, 4097}, {300, 2000}, {2000, 300}, {1000, 1000}};

TEST(Sm90Mask, TileCountsAndSplitPointMatchTheRule) {
  for (const Shape& sh : kShapes) {
    both_kinds(sh.sq, sh.sk, [&](const auto& m, bool causal) {
      for (int block_m : {128, 192}) {
        for (int block_n : {80, 128, 160, 176}) {
          for (int m0 = 0; m0 < sh.sq; m0 += block_m) {
            // Last key any row of the block sees, +1.
            long long keys = 0;
            for (long long r = m0; r < m0 + block_m; ++r)
              for (long long c = keys; c < sh.sk; ++c)
                if (visible(m, r, c)) keys = c + 1;
            const int n_blocks = m.num_n_blocks(m0, block_m, block_n);
            ASSERT_EQ(n_blocks, (keys + block_n - 1) / block_n) << sh.sq << "x" << sh.sk << " m0 " << m0;
            int leading_unmasked = 0;
            bool prefix = true;
            for (int n = 0; n < n_blocks; ++n) {
              // A tile needs no mask iff every (row >= m0 of the block, key of the tile) is visible.
              bool all_visible = true;
              for (long long r = m0; r < m0 + block_m && all_visible; ++r)
                for (long long c = (long long)n * block_n; c < (long long)(n + 1) * block_n && all_visible; ++c)
                  all_visible = visible(m, r, c);
              ASSERT_EQ(m.tile_needs_mask(n, m0, block_n), !all_visible)
                  << sh.sq << "x" << sh.sk << " causal " << causal << " m0 " << m0 << " n " << n;
              if (all_visible && prefix) ++leading_unmasked;
              else prefix = false;
            }
            // Tiles [0, split) run without a mask; tiles at or above it get the mask applied.
            const int split = m.num_unmasked_blocks(m0, block_n);
            ASSERT_EQ(split < n_blocks ? split : n_blocks, leading_unmasked)
                << sh.sq << "x" << sh.sk << " causal " << causal << " m0 " << m0 << " block_n " << block_n;
          }
        }
      }
    });
  }
}

// apply() on a consumer group's S fragment: thread t of the group holds rows row0 = 16 (t / 32)
// + (t % 32) / 4 and row0 + 8, columns 8 (i >> 2) + 2 (t % 4) + (i & 1) of the tile.
TEST(Sm90Mask, FragmentMaskingMatchesTheRule) {
  constexpr int kBlockN = 176;
  for (const Shape& sh : kShapes) {
    both_kinds(sh.sq, sh.sk, [&](const auto& m, bool causal) {
      for (int m0 = 0; m0 < sh.sq; m0 += 128) {
        const int n_blocks = m.num_n_blocks(m0, 128, kBlockN);
        for (int n = 0; n < n_blocks; ++n) {
          for (int wg = 0; wg < 2; ++wg) {
            for (int t = 0; t < 128; ++t) {
              float s[kBlockN / 2];
              for (float& x : s) x = 1.f;
              const int row0 = m0 + 64 * wg + 16 * (t / 32) + (t % 32) / 4;
              const int col0 = n * kBlockN + 2 * (t % 4);
              m.apply(s, row0, col0);
              for (int i = 0; i < kBlockN / 2; ++i) {
                const int row = row0 + 8 * ((i >> 1) & 1), col = col0 + 8 * (i >> 2) + (i & 1);
                ASSERT_EQ(std::isinf(s[i]), !visible(m, row, col))
                    << sh.sq << "x" << sh.sk << " causal " << causal << " row " << row << " col " << col;
              }
            }
          }
        }
      }
    });
  }
}

}  // namespace
