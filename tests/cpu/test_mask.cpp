// common/mask.h against the element-wise rule, written out here independently: key c is
// visible to query r (0 <= r < Sq, 0 <= c < Sk) iff not causal, or c <= r + Sk - Sq; under a
// window (left, right) (-1: unbounded) iff r + Sk - Sq - left <= c <= r + Sk - Sq + right. Every
// block range both directions iterate must hold exactly the blocks with a visible element, and
// the "unmasked" split points exactly the blocks where every element is visible.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "common/mask.h"

namespace {

using flashattn::Mask;
using flashattn::MaskKind;

bool rule(bool causal, long long sq, long long sk, long long r, long long c) {
  return r >= 0 && r < sq && c >= 0 && c < sk && (!causal || c <= r + sk - sq);
}

struct Shape {
  int sq, sk;
};
const std::vector<Shape> kShapes = {{1, 1},     {1, 17},     {17, 1},     {17, 17},   {113, 1000}, {1000, 113},
                                    {128, 128}, {300, 2000}, {2000, 300}, {257, 255}, {64, 1}};

template <MaskKind Kind>
void check_shape(const Shape& sh, int bm, int bn) {
  constexpr bool causal = Kind == MaskKind::kCausal;
  const Mask<Kind> m{sh.sq, sh.sk};
  const int num_m = (sh.sq + bm - 1) / bm, num_n = (sh.sk + bn - 1) / bn;
  for (long long r = -1; r <= sh.sq; ++r)
    for (long long c = -1; c <= sh.sk; ++c) ASSERT_EQ(m.visible(r, c), rule(causal, sh.sq, sh.sk, r, c));
  // any[mb][nb]: some element visible; all[mb][nb]: every element (of existing rows/keys) visible.
  std::vector<std::vector<char>> any(num_m, std::vector<char>(num_n, 0)), all = any;
  for (int mb = 0; mb < num_m; ++mb)
    for (int nb = 0; nb < num_n; ++nb) {
      bool a = false, e = true;
      for (long long r = (long long)mb * bm; r < (long long)(mb + 1) * bm && r < sh.sq; ++r)
        for (long long c = (long long)nb * bn; c < (long long)(nb + 1) * bn; ++c) {
          const bool v = rule(causal, sh.sq, sh.sk, r, c);
          a = a || v;
          e = e && v;  // keys past Sk count as masked: a partial last block needs the mask
        }
      any[mb][nb] = a;
      all[mb][nb] = e;
    }
  for (int mb = 0; mb < num_m; ++mb) {
    const auto range = m.n_block_range(mb, bm, bn);
    for (int nb = 0; nb < num_n; ++nb)
      ASSERT_EQ(nb >= range.lo && nb < range.hi, any[mb][nb] != 0)
          << sh.sq << "x" << sh.sk << " causal " << causal << " mb " << mb << " nb " << nb;
    // Unmasked key blocks for rows >= m0: a prefix of the range.
    const int split = m.num_unmasked_n_blocks(static_cast<long long>(mb) * bm, bn);
    for (int nb = 0; nb < num_n; ++nb) ASSERT_EQ(nb < split, all[mb][nb] != 0) << "mb " << mb << " nb " << nb;
  }
  for (int nb = 0; nb < num_n; ++nb) {
    const auto range = m.m_block_range(nb, bm, bn);
    const int first_full = m.first_unmasked_m_block(nb, bm, bn);
    for (int mb = 0; mb < num_m; ++mb) {
      ASSERT_EQ(mb >= range.lo && mb < range.hi, any[mb][nb] != 0)
          << sh.sq << "x" << sh.sk << " causal " << causal << " nb " << nb << " mb " << mb;
      ASSERT_EQ(mb >= first_full, all[mb][nb] != 0)
          << sh.sq << "x" << sh.sk << " causal " << causal << " nb " << nb << " mb " << mb;
    }
  }
}

TEST(Mask, BlockRangesBothWaysMatchTheElementRule) {
  for (const Shape& sh : kShapes)
    for (int bm : {16, 64, 128, 192})
      for (int bn : {16, 64, 80, 128, 176}) {
        check_shape<MaskKind::kNone>(sh, bm, bn);
        check_shape<MaskKind::kCausal>(sh, bm, bn);
      }
}

// The window rule straight from issue 17 (FlashAttention 2's window_size): -1 is unbounded.
bool window_rule(long long left, long long right, long long sq, long long sk, long long r, long long c) {
  if (r < 0 || r >= sq || c < 0 || c >= sk) return false;
  const long long diag = r + sk - sq;
  return (left < 0 || c >= diag - left) && (right < 0 || c <= diag + right);
}

struct Window {
  int left, right;
};
const std::vector<Window> kWindows = {{0, 0},    {1, 0},  {127, 0}, {256, 256}, {1000, 3}, {-1, 0},
                                      {5, -1},   {-1, -1}, {0, 7},  {3, 2},     {40000, 1}};

// Every range of a kLocal mask against the element rule of `left`, `right` (the caller's -1
// form; `m` is whatever make_local_mask made of it).
void check_local(const Mask<MaskKind::kLocal>& m, int left, int right, int bm, int bn) {
  const int sq = m.sq, sk = m.sk;
  const auto rule = [&](long long r, long long c) { return window_rule(left, right, sq, sk, r, c); };
  const int num_m = (sq + bm - 1) / bm, num_n = (sk + bn - 1) / bn;
  std::ostringstream where;
  where << sq << "x" << sk << " window (" << left << "," << right << ") block " << bm << "x" << bn;
  std::vector<std::vector<char>> any(num_m, std::vector<char>(num_n, 0)), all = any;
  for (int mb = 0; mb < num_m; ++mb)
    for (int nb = 0; nb < num_n; ++nb) {
      bool a = false, e = true;
      for (long long r = (long long)mb * bm; r < (long long)(mb + 1) * bm && r < sq; ++r)
        for (long long c = (long long)nb * bn; c < (long long)(nb + 1) * bn; ++c) {
          const bool v = rule(r, c);
          a = a || v;
          e = e && v;
        }
      any[mb][nb] = a;
      all[mb][nb] = e;
    }
  // all_below[mb][nb]: every query block from mb to the last sees all of key block nb.
  auto all_below = all;
  for (int mb = num_m - 2; mb >= 0; --mb)
    for (int nb = 0; nb < num_n; ++nb) all_below[mb][nb] = all_below[mb][nb] && all_below[mb + 1][nb];
  for (int mb = 0; mb < num_m; ++mb) {
    const auto range = m.n_block_range(mb, bm, bn);
    const auto unmasked = m.unmasked_n_block_range(mb, bm, bn);
    const int split = m.num_unmasked_n_blocks(static_cast<long long>(mb) * bm, bn);
    for (int nb = 0; nb < num_n; ++nb) {
      ASSERT_EQ(nb >= range.lo && nb < range.hi, any[mb][nb] != 0) << where.str() << " mb " << mb << " nb " << nb;
      ASSERT_EQ(nb >= unmasked.lo && nb < unmasked.hi, all[mb][nb] != 0)
          << where.str() << " unmasked mb " << mb << " nb " << nb;
      // The prefix form: blocks [0, split) are whole for every row >= m0.
      bool whole_below = true;
      for (int k = mb; k < num_m; ++k) whole_below = whole_below && all[k][nb];
      if (nb < split) {
        ASSERT_TRUE(whole_below) << where.str() << " prefix mb " << mb << " nb " << nb;
      }
      if (nb == split) {
        ASSERT_FALSE(whole_below) << where.str() << " prefix end mb " << mb;
      }
    }
  }
  for (int nb = 0; nb < num_n; ++nb) {
    const auto range = m.m_block_range(nb, bm, bn);
    const auto unmasked = m.unmasked_m_block_range(nb, bm, bn);
    const int first_full = m.first_unmasked_m_block(nb, bm, bn);
    for (int mb = 0; mb < num_m; ++mb) {
      ASSERT_EQ(mb >= range.lo && mb < range.hi, any[mb][nb] != 0) << where.str() << " nb " << nb << " mb " << mb;
      ASSERT_EQ(mb >= unmasked.lo && mb < unmasked.hi, all[mb][nb] != 0)
          << where.str() << " unmasked nb " << nb << " mb " << mb;
      ASSERT_EQ(mb >= first_full, all_below[mb][nb] != 0) << where.str() << " suffix nb " << nb << " mb " << mb;
    }
  }
  // A window gives lo > 0 once its left edge passes whole blocks: some query block must say so
  // when the last block's first row's window starts a block or more in.
  if (left >= 0 && sq > 0 && sk > 0 && (long long)(num_m - 1) * bm + sk - sq - left >= bn) {
    ASSERT_GT(m.n_block_range(num_m - 1, bm, bn).lo, 0) << where.str();
  }
}

TEST(Mask, LocalElementRuleAndInverses) {
  for (const Shape& sh : kShapes)
    for (const Window& w : kWindows) {
      const auto m = flashattn::make_local_mask(sh.sq, sh.sk, w.left, w.right);
      for (long long r = -1; r <= sh.sq; ++r)
        for (long long c = -1; c <= sh.sk; ++c) {
          const bool v = window_rule(w.left, w.right, sh.sq, sh.sk, r, c);
          ASSERT_EQ(m.visible(r, c), v) << sh.sq << "x" << sh.sk << " (" << w.left << "," << w.right << ") " << r << "," << c;
          if (r >= 0 && r < sh.sq && c >= 0 && c < sh.sk) {
            ASSERT_EQ(v, c >= m.key_begin(r) && c < m.key_end(r));
            ASSERT_EQ(v, r >= m.row_begin(c) && r < m.row_end(c));
          }
        }
    }
}

TEST(Mask, LocalBlockRangesBothWaysMatchTheElementRule) {
  for (const Shape& sh : kShapes)
    for (const Window& w : kWindows)
      for (int bm : {16, 64, 128, 192})
        for (int bn : {16, 64, 80, 128, 176})
          check_local(flashattn::make_local_mask(sh.sq, sh.sk, w.left, w.right), w.left, w.right, bm, bn);
}

TEST(Mask, CausalWindowIsRightZeroAndUnboundedLeftIsCausal) {
  for (const Shape& sh : kShapes) {
    // causal + (5, 7) is the window (5, 0); causal + (-1, -1) is plain causal.
    const auto cw = flashattn::make_local_mask(sh.sq, sh.sk, 5, 7, /*causal=*/true);
    const auto w50 = flashattn::make_local_mask(sh.sq, sh.sk, 5, 0);
    const auto cu = flashattn::make_local_mask(sh.sq, sh.sk, -1, -1, /*causal=*/true);
    const Mask<MaskKind::kCausal> causal{sh.sq, sh.sk};
    for (long long r = -1; r <= sh.sq; ++r)
      for (long long c = -1; c <= sh.sk; ++c) {
        ASSERT_EQ(cw.visible(r, c), w50.visible(r, c));
        ASSERT_EQ(cu.visible(r, c), causal.visible(r, c));
      }
    for (int bm : {16, 128})
      for (int bn : {64, 176}) {
        check_local(cw, 5, 0, bm, bn);
        const int num_m = (sh.sq + bm - 1) / bm, num_n = (sh.sk + bn - 1) / bn;
        for (int mb = 0; mb < num_m; ++mb) {
          const auto a = cu.n_block_range(mb, bm, bn), b = causal.n_block_range(mb, bm, bn);
          if (!b.empty()) {
        ASSERT_TRUE(a.lo == b.lo && a.hi == b.hi);
      }
          ASSERT_EQ(cu.num_unmasked_n_blocks((long long)mb * bm, bn), causal.num_unmasked_n_blocks((long long)mb * bm, bn));
        }
        for (int nb = 0; nb < num_n; ++nb)
          ASSERT_EQ(cu.first_unmasked_m_block(nb, bm, bn), causal.first_unmasked_m_block(nb, bm, bn));
      }
  }
}

// The range helpers added for kLocal agree with the prefix / suffix forms on the old kinds.
TEST(Mask, UnmaskedRangesMatchThePrefixFormsOfNoneAndCausal) {
  for (const Shape& sh : kShapes)
    for (int bm : {16, 64, 192})
      for (int bn : {16, 80, 176}) {
        const int num_m = (sh.sq + bm - 1) / bm, num_n = (sh.sk + bn - 1) / bn;
        auto check = [&](const auto& m) {
          for (int mb = 0; mb < num_m; ++mb) {
            const auto u = m.unmasked_n_block_range(mb, bm, bn);
            const int split = m.num_unmasked_n_blocks((long long)mb * bm, bn);
            ASSERT_EQ(u.lo, 0);
            ASSERT_EQ(u.hi, split);
            ASSERT_EQ(m.key_begin(mb * bm), 0);
          }
          for (int nb = 0; nb < num_n; ++nb) {
            const auto u = m.unmasked_m_block_range(nb, bm, bn);
            const int first = m.first_unmasked_m_block(nb, bm, bn);
            ASSERT_EQ(u.empty() ? num_m : u.lo, first);
            if (!u.empty()) {
        ASSERT_EQ(u.hi, num_m);
      }
            ASSERT_EQ(m.row_end(nb * bn), sh.sq);
          }
        };
        check(Mask<MaskKind::kNone>{sh.sq, sh.sk});
        check(Mask<MaskKind::kCausal>{sh.sq, sh.sk});
      }
}

TEST(Mask, KeyEndAndRowBeginAreInverse) {
  for (const Shape& sh : kShapes) {
    const Mask<MaskKind::kCausal> m{sh.sq, sh.sk};
    for (long long c = 0; c < sh.sk; ++c)
      for (long long r = 0; r < sh.sq; ++r) ASSERT_EQ(r >= m.row_begin(c), c < m.key_end(r)) << r << "," << c;
  }
}

}  // namespace
