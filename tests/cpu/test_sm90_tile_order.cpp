// The sm90 tile order (src/sm90/tile_order.h): every tile index maps to a distinct
// (m block, head, batch); one pair per group is the old m-fastest order; causal groups fit the
// L2 budget and visit m blocks longest first (a smaller remainder group first), so a causal
// grid ends on its shortest tiles.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "sm90/tile_order.h"

namespace {

using flashattn::sm90::TileOrder;

struct Shape {
  int m_blocks, hq, b, sk, d;
};

TEST(Sm90TileOrder, IsABijectionAndGroupsGoLongestFirst) {
  for (const Shape& s : {Shape{16, 16, 8, 2048, 128}, Shape{128, 16, 1, 16384, 128}, Shape{11, 32, 8, 2048, 64},
                         Shape{3, 5, 7, 300, 64}, Shape{1, 1, 1, 1, 64}, Shape{9, 6, 5, 1000, 256}})
    for (bool causal : {false, true})
      for (long long budget : {1LL << 20, 25LL << 20}) {
        const TileOrder o = TileOrder::make(s.m_blocks, s.hq, s.b, s.sk, s.d, causal, budget);
        SCOPED_TRACE(testing::Message() << s.m_blocks << "x" << s.hq << "x" << s.b << " causal " << causal
                                        << " group " << o.heads_per_group);
        ASSERT_GE(o.heads_per_group, 1);
        if (!causal) {
          ASSERT_EQ(o.heads_per_group, 1);
        } else if (o.heads_per_group > 1) {
          ASSERT_LE(4LL * s.sk * s.d * o.heads_per_group, budget);
        }
        const int tiles = s.m_blocks * s.hq * s.b;
        std::set<std::tuple<int, int, int>> seen;
        int prev_group = -2, prev_rank = -1;
        for (int t = 0; t < tiles; ++t) {
          int m, h, bb;
          o.decode(t, m, h, bb);
          ASSERT_TRUE(m >= 0 && m < s.m_blocks && h >= 0 && h < s.hq && bb >= 0 && bb < s.b) << t;
          ASSERT_TRUE(seen.emplace(m, h, bb).second) << "tile " << t << " repeats";
          const int pair = bb * s.hq + h, rank = s.m_blocks - 1 - m;
          const int group = pair < o.first_group ? -1 : (pair - o.first_group) / o.heads_per_group;
          ASSERT_GE(group, prev_group) << "groups in order";
          if (group == prev_group) {
            ASSERT_GE(rank, prev_rank) << "longest m block first within a group";
          }
          if (o.heads_per_group == 1) {  // the old order: m fastest, last m block first
            ASSERT_EQ(pair, t / s.m_blocks);
            ASSERT_EQ(m, s.m_blocks - 1 - t % s.m_blocks);
          }
          prev_group = group;
          prev_rank = rank;
        }
      }
}

TEST(Sm90TileOrder, CausalStandardGridEndsOnShortTiles) {
  // D=128 causal 2k: 16 m blocks x 128 pairs; 1 MB of K/V per pair, 25 pairs per group.
  const TileOrder o = TileOrder::make(16, 16, 8, 2048, 128, true);
  EXPECT_EQ(o.heads_per_group, 25);
  for (int t = 16 * 128 - 132; t < 16 * 128; ++t) {  // the last wave of 132 CTAs
    int m, h, b;
    o.decode(t, m, h, b);
    EXPECT_LT(m, 8) << "tile " << t;
  }
}

}  // namespace
