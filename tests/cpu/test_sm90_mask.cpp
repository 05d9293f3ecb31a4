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

// Half key blocks: whenever half_edges says a half of a group's first (hi) or last (lo) block is
// unseen, no row of the group sees a key there, under the causal rule and windows; and when a
// half is unseen by every row below Sq, the test finds it for the causal diagonals of Sq == Sk.
TEST(Sm90Mask, HalfEdgesHideOnlyUnseenKeys) {
  using flashattn::make_local_mask;
  constexpr int kBlockN = 128, kBlockM = 128;
  struct Win {
    int left, right;
  };
  const std::vector<Win> wins = {{1024, 0}, {300, 0}, {127, 0}, {1000, 3}, {256, 256}, {64, -1}, {191, 0}, {0, 0}};
  int hi_seen = 0, lo_seen = 0;
  // Besides kShapes, offsets Sk - Sq that put a group's last key one past a half's edge.
  std::vector<Shape> shapes = kShapes;
  for (Shape extra : {Shape{1000, 1001}, Shape{500, 565}, Shape{257, 320}, Shape{640, 575}}) shapes.push_back(extra);
  for (const Shape& sh : shapes) {
    auto check = [&](const auto& m, auto&& vis) {
      for (int m0 = 0; m0 < sh.sq; m0 += kBlockM) {
        const int n_lo = m.first_n_block(m0, kBlockN), n_hi = m.num_n_blocks(m0, kBlockM, kBlockN);
        if (n_hi <= n_lo) continue;
        for (int g0 = m0; g0 < m0 + kBlockM; g0 += 64) {
          const auto e = m.half_edges(g0, n_lo, n_hi, kBlockN);
          ASSERT_FALSE(e.hi && e.lo && n_hi - 1 == n_lo);
          for (long long r = g0; r < g0 + 64 && r < sh.sq; ++r) {
            for (int c = 0; c < kBlockN / 2; ++c) {
              if (e.hi) {
                ASSERT_FALSE(vis(r, (n_hi - 1) * kBlockN + kBlockN / 2 + c)) << sh.sq << "x" << sh.sk << " g0 " << g0;
              }
              if (e.lo) {
                ASSERT_FALSE(vis(r, n_lo * kBlockN + c)) << sh.sq << "x" << sh.sk << " g0 " << g0;
              }
            }
          }
          hi_seen += e.hi;
          lo_seen += e.lo;
        }
      }
    };
    const AttnMask<MaskKind::kCausal> causal{{sh.sq, sh.sk}};
    check(causal, [&](long long r, long long c) { return visible(causal, r, c); });
    if (sh.sq == sh.sk && sh.sq >= kBlockM) {  // group 0 of every whole diagonal tile
      for (int m0 = 0; m0 + kBlockM <= sh.sq; m0 += kBlockM)
        EXPECT_TRUE(causal.half_edges(m0, 0, causal.num_n_blocks(m0, kBlockM, kBlockN), kBlockN).hi) << m0;
    }
    for (const Win& w : wins) {
      const AttnMask<MaskKind::kLocal> local{make_local_mask(sh.sq, sh.sk, w.left, w.right)};
      check(local, [&](long long r, long long c) {  // FlashAttention 2's window, written out
        const long long diag = r + sh.sk - sh.sq;
        return c >= 0 && c < sh.sk && (w.left < 0 || c >= diag - w.left) && (w.right < 0 || c <= diag + w.right);
      });
    }
  }
  // The shapes reach both kinds of half block.
  EXPECT_GT(hi_seen, 0);
  EXPECT_GT(lo_seen, 0);
}

}  // namespace
