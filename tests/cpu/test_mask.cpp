// common/mask.h against the element-wise rule, written out here independently: key c is
// visible to query r (0 <= r < Sq, 0 <= c < Sk) iff not causal, or c <= r + Sk - Sq. Every
// block range both directions iterate must hold exactly the blocks with a visible element, and
// the "unmasked" split points exactly the blocks where every element is visible.
#include <gtest/gtest.h>

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

TEST(Mask, KeyEndAndRowBeginAreInverse) {
  for (const Shape& sh : kShapes) {
    const Mask<MaskKind::kCausal> m{sh.sq, sh.sk};
    for (long long c = 0; c < sh.sk; ++c)
      for (long long r = 0; r < sh.sq; ++r) ASSERT_EQ(r >= m.row_begin(c), c < m.key_end(r)) << r << "," << c;
  }
}

}  // namespace
