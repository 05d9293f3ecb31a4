// The stream-K tail's work plan (src/sm90/stream_k.h) on the CPU: the pieces of the work items
// cover every key block of every split tile exactly once, each chunk has at most two pieces,
// workspace slots are unique, and the per-tile chunk range the merging warp walks (slot_of)
// finds exactly the pieces that wrote. Also when the plan splits and when it must not.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "sm90/fwd/stream_k.h"

namespace {

using flashattn::sm90::StreamKPlan;

void check_partition(long long tiles, int ctas, int nb) {
  const StreamKPlan p = StreamKPlan::make(tiles, ctas, nb);
  SCOPED_TRACE(testing::Message() << tiles << " tiles, " << ctas << " ctas, " << nb << " blocks");
  ASSERT_EQ(p.dp_tiles + p.sk_tiles, tiles);
  if (p.chunks == 0) {
    ASSERT_EQ(p.sk_tiles, 0);
    return;
  }
  ASSERT_EQ(p.dp_tiles % ctas, 0) << "whole tiles fill whole waves";
  ASSERT_LT(p.sk_tiles, ctas);
  ASSERT_LE(p.chunks, ctas);
  ASSERT_GT(p.chunks, p.sk_tiles) << "a split that splits nothing";
  // Who covers each (split tile, key block), and which slot each split tile's pieces used.
  std::vector<int> cover(static_cast<size_t>(p.sk_tiles) * nb, 0);
  std::map<int, std::set<int>> slots_of_tile;
  std::set<int> slots;
  long long largest = 0;
  for (int item = 0; item < p.num_items(); ++item) {
    StreamKPlan::Piece w;
    ASSERT_TRUE(p.piece(item, 0, w));
    StreamKPlan::Piece w1;
    const bool two = p.piece(item, 1, w1);
    if (item < p.dp_tiles) {
      ASSERT_FALSE(two);
      ASSERT_EQ(w.tile, item);
      ASSERT_EQ(w.slot, -1);
      continue;
    }
    long long units = 0;
    for (int pi = 0; pi < (two ? 2 : 1); ++pi) {
      if (pi == 1) {
        ASSERT_TRUE(p.piece(item, 1, w));
      }
      ASSERT_GE(w.tile, p.dp_tiles);
      ASSERT_LT(w.tile, tiles);
      ASSERT_GE(w.n_lo, 0);
      ASSERT_LT(w.n_lo, w.n_hi);
      ASSERT_LE(w.n_hi, nb);
      units += w.n_hi - w.n_lo;
      const int j = w.tile - p.dp_tiles;
      for (int n = w.n_lo; n < w.n_hi; ++n) ++cover[static_cast<size_t>(j) * nb + n];
      if (w.slot < 0) {  // a chunk that is exactly one tile
        ASSERT_EQ(w.n_lo, 0);
        ASSERT_EQ(w.n_hi, nb);
        ASSERT_EQ(w.first_chunk, w.last_chunk);
        continue;
      }
      ASSERT_EQ(w.sk_tile, j);
      ASSERT_TRUE(slots.insert(w.slot).second) << "slot " << w.slot << " used twice";
      ASSERT_LT(w.slot, 2 * p.chunks);
      const int i = item - p.dp_tiles;
      ASSERT_LE(w.first_chunk, i);
      ASSERT_GE(w.last_chunk, i);
      ASSERT_EQ(p.slot_of(i, j), w.slot);
      slots_of_tile[j].insert(w.slot);
    }
    largest = std::max(largest, units);
  }
  for (size_t u = 0; u < cover.size(); ++u) ASSERT_EQ(cover[u], 1) << "unit " << u;
  // The merging warp walks first..last chunk: exactly the slots that were written.
  for (const auto& [j, written] : slots_of_tile) {
    // The tile's first unit lies in chunk i0: its piece 0, or piece 1 if the chunk began earlier.
    StreamKPlan::Piece any;
    const int i0 = p.chunk_of(j * nb);
    ASSERT_TRUE(p.piece(p.dp_tiles + i0, 0, any));
    if (any.tile != p.dp_tiles + j) {
      ASSERT_TRUE(p.piece(p.dp_tiles + i0, 1, any));
    }
    ASSERT_EQ(any.tile, p.dp_tiles + j);
    std::set<int> walked;
    for (int i = any.first_chunk; i <= any.last_chunk; ++i) walked.insert(p.slot_of(i, j));
    ASSERT_EQ(walked, written) << "tile " << j;
  }
  ASSERT_LE((largest + StreamKPlan::kOverheadUnits) * 20, 17LL * nb) << "the split tail must be clearly shorter";
}

TEST(Sm90StreamK, PiecesPartitionTheSplitTiles) {
  for (int ctas : {1, 7, 132})
    for (long long tiles : {1LL, 3LL, 4LL, 64LL, 131LL, 133LL, 200LL, 2048LL, 2816LL, 1024LL})
      for (int nb : {1, 2, 3, 5, 6, 13, 26, 94, 103, 1000}) check_partition(tiles, ctas, nb);
}

TEST(Sm90StreamK, FastDivMatchesDivision) {
  std::vector<int> divisors = {1, 2, 3, 5, 7, 13, 16, 26, 94, 103, 132, 1000, 65535, 65536, 1 << 20, 2147483647};
  for (int d = 1; d < 300; ++d) divisors.push_back(d);
  std::vector<int> xs = {0, 1, 2, 1000, 65535, 65536, 2147483646, 2147483647};
  unsigned r = 12345u;
  for (int k = 0; k < 2000; ++k) xs.push_back(static_cast<int>((r = r * 1664525u + 1013904223u) >> 1));
  for (int d : divisors) {
    const flashattn::FastDiv f(d);
    for (int x : xs) ASSERT_EQ(f(x), x / d) << x << " / " << d;
    for (int q : {1, 2, 1000}) {  // around multiples of d, where rounding errors show
      const long long m = static_cast<long long>(q) * d;
      for (long long x = m - 1; x <= m + 1; ++x)
        if (x >= 0 && x <= 2147483647LL) {
          ASSERT_EQ(f(static_cast<int>(x)), static_cast<int>(x / d)) << x << " / " << d;
        }
    }
  }
}

// One row split into pieces the way the kernel sees them: per piece the max of scaled scores
// (exp2 domain), the sum of exp2(score - max) and the weighted V; folded in piece order with
// merge_factors, the first piece taken as is. Must equal the whole row's softmax and lse.
struct Partial {
  float m, l;
  std::vector<float> o;
};

Partial piece_partial(const std::vector<double>& s, const std::vector<std::vector<double>>& v, size_t lo, size_t hi,
                      float scale_log2) {
  const size_t d = v[0].size();
  Partial p{-INFINITY, 0.f, std::vector<float>(d, 0.f)};
  for (size_t j = lo; j < hi; ++j) p.m = std::max(p.m, static_cast<float>(s[j]) * scale_log2);
  for (size_t j = lo; j < hi; ++j) {
    if (p.m == -INFINITY) break;
    const float e = std::exp2(static_cast<float>(s[j]) * scale_log2 - p.m);
    p.l += e;
    for (size_t c = 0; c < d; ++c) p.o[c] += e * static_cast<float>(v[j][c]);
  }
  return p;
}

Partial fold(const std::vector<Partial>& parts) {
  Partial acc = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    float a, b;
    flashattn::sm90::merge_factors(acc.m, parts[i].m, a, b, [](float x) { return std::exp2(x); });
    acc.l = acc.l * a + parts[i].l * b;
    for (size_t c = 0; c < acc.o.size(); ++c) acc.o[c] = acc.o[c] * a + parts[i].o[c] * b;
  }
  return acc;
}

TEST(Sm90StreamK, MergeEqualsTheWholeRowsSoftmax) {
  std::mt19937 rng(7);
  std::normal_distribution<double> nd(0.3, 1.0);
  const int d = 16;
  const float scale = 0.125f, scale_log2 = scale * 1.4426950408889634f;
  for (int n : {2, 17, 160, 1000})
    for (int cuts : {1, 2, 5}) {
      std::vector<double> s(n);
      std::vector<std::vector<double>> v(n, std::vector<double>(d));
      for (int j = 0; j < n; ++j) {
        s[j] = 4 * nd(rng);
        for (double& x : v[j]) x = nd(rng);
      }
      std::vector<size_t> at = {0};
      for (int c = 1; c <= cuts && c < n; ++c) at.push_back(static_cast<size_t>(n) * c / (cuts + 1));
      at.push_back(n);
      std::vector<Partial> parts;
      for (size_t i = 0; i + 1 < at.size(); ++i) parts.push_back(piece_partial(s, v, at[i], at[i + 1], scale_log2));
      const Partial r = fold(parts);
      double mx = -INFINITY, sum = 0;
      for (double x : s) mx = std::max(mx, x * scale);
      for (double x : s) sum += std::exp(x * scale - mx);
      const double lse_ref = mx + std::log(sum);
      const double lse = (static_cast<double>(r.m) + std::log2(static_cast<double>(r.l))) * 0.6931471805599453;
      ASSERT_NEAR(lse, lse_ref, 1e-5 * std::max(1.0, std::fabs(lse_ref))) << n << " keys, " << cuts << " cuts";
      for (int c = 0; c < d; ++c) {
        double ref = 0;
        for (int j = 0; j < n; ++j) ref += std::exp(s[j] * scale - mx) / sum * v[j][c];
        ASSERT_NEAR(r.o[c] / r.l, ref, 1e-5 * (1 + std::fabs(ref))) << n << " keys, " << cuts << " cuts, col " << c;
      }
    }
}

TEST(Sm90StreamK, MergeOfPiecesWithoutKeysIsZeroNotNaN) {
  const Partial none{-INFINITY, 0.f, {0.f, 0.f}};
  const Partial some{3.f, 2.f, {4.f, -2.f}};
  for (const auto& parts : {std::vector<Partial>{none, some}, std::vector<Partial>{some, none}}) {
    const Partial r = fold(parts);
    EXPECT_EQ(r.m, 3.f);
    EXPECT_FLOAT_EQ(r.l, 2.f);
    EXPECT_FLOAT_EQ(r.o[0], 4.f);
    EXPECT_FLOAT_EQ(r.o[1], -2.f);
  }
  const Partial r = fold({none, none});
  EXPECT_EQ(r.m, -INFINITY);
  EXPECT_EQ(r.l, 0.f);
  EXPECT_FALSE(std::isnan(r.o[0]));
}

TEST(Sm90StreamK, SplitsTheStandardGridTail) {
  // D=128, 16k tokens, H=16: 2048 tiles of 128 rows; 2k keys at BlockN 160 are 13 blocks.
  const StreamKPlan p = StreamKPlan::make(2048, 132, 13);
  EXPECT_EQ(p.dp_tiles, 15 * 132);
  EXPECT_EQ(p.sk_tiles, 68);
  EXPECT_EQ(p.chunks, 132);
  // One tile with long keys (split-KV): many chunks share it.
  const StreamKPlan q = StreamKPlan::make(1, 132, 94);
  EXPECT_EQ(q.dp_tiles, 0);
  EXPECT_EQ(q.chunks, 94 / (2 * StreamKPlan::kOverheadUnits));
}

TEST(Sm90StreamK, DoesNotSplitWhenItCannotHelp) {
  EXPECT_EQ(StreamKPlan::make(2 * 132, 132, 13).chunks, 0);  // whole waves
  EXPECT_EQ(StreamKPlan::make(100, 132, 1).chunks, 0);       // one key block per tile
  EXPECT_EQ(StreamKPlan::make(130, 132, 13).chunks, 0);      // tail nearly full: 13 > 130*13/132 + 2
  EXPECT_EQ(StreamKPlan::make(128, 132, 2).chunks, 0);       // chunks would be whole tiles
  EXPECT_EQ(StreamKPlan::make(0, 132, 13).chunks, 0);
  EXPECT_EQ(StreamKPlan::make(128, 132, 103).chunks, 0);  // 100 of 103 blocks per chunk: measured -5%
  EXPECT_EQ(StreamKPlan::make(512, 132, 25).chunks, 0);   // 22 of 25: measured -1%
}

}  // namespace
