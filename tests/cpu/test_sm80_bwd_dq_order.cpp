// The sm80 backward's warp-ordered dQ accumulator (sm80/bwd/config.h dq_frag_order,
// Sm80BwdConfig::dq_frag_offset): a permutation of each query block, and the place where the
// kernel's red of each lane's fragment pair lands. No GPU.
#include <gtest/gtest.h>

#include <vector>

#include "sm80/bwd/config.h"

using namespace flashattn::sm80;

namespace {

constexpr Sm80BwdOptions frag(Sm80BwdOptions o, bool v4 = false) {
  o.dq_frag_order = true;
  o.dq_red_v4 = v4;
  return o;
}

// Every float of the kBlockM x kHeadDim block is hit once through the 8-column map (four column
// pairs kDqPairStride floats apart).
template <Sm80BwdOptions O>
void expect_permutation() {
  using C = Sm80BwdConfig<O>;
  std::vector<int> hits(C::kBlockM * C::kHeadDim, 0);
  for (int r = 0; r < C::kBlockM; ++r)
    for (int c = 0; c < C::kHeadDim; c += 8)
      for (int j = 0; j < 8; ++j) {
        const int off = C::dq_frag_offset(r, c) + j / 2 * C::kDqPairStride + j % 2;
        ASSERT_GE(off, 0);
        ASSERT_LT(off, C::kBlockM * C::kHeadDim);
        ++hits[off];
      }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "float " << i;
}

// The m16n8 accumulator fragment (PTX ISA, mma.m16n8k16 .f32 D): lane l holds rows l / 4 and
// l / 4 + 8, columns 2 (l % 4) and + 1 of its n8 tile. Warp w's dQ tile and the order of its
// red instructions as bwd/kernel.h issues them (pass, row tile, row half, n8 tile or pair of
// them): the instruction's 32 lanes must write 64 (128) contiguous floats, lane l at 2 l (4 l),
// the pair of tile nt before that of nt + 1, and each element must be where the postprocess
// looks for it.
template <Sm80BwdOptions O>
void expect_kernel_order() {
  using C = Sm80BwdConfig<O>;
  const int pass_cols = C::kDqCols / C::kDqPasses;
  for (int w = 0; w < C::kWarps; ++w) {
    const int row0 = (w % C::kDqWarpsM) * C::kDqWarpRows, col0 = (w / C::kDqWarpsM) * C::kDqCols;
    int instr = 0;
    for (int pass = 0; pass < C::kDqPasses; ++pass)
      for (int rt = 0; rt < C::kDqRowTiles; ++rt)
        for (int hh = 0; hh < 2; ++hh)
          for (int nt = 0; nt < C::kNTdq; nt += C::kDqVec, ++instr)
            for (int lane = 0; lane < 32; ++lane)
              for (int k = 0; k < 2 * C::kDqVec; ++k) {  // the lane's k-th float of the instruction
                const int row = row0 + rt * 16 + lane / 4 + 8 * hh;
                const int col = col0 + pass * pass_cols + (nt + k / 2) * 8 + 2 * (lane % 4) + k % 2;
                const int expect = w * C::kDqWarpRows * C::kDqCols + instr * 64 * C::kDqVec + 2 * C::kDqVec * lane + k;
                ASSERT_EQ(C::dq_frag_offset(row, col / 8 * 8) + (col % 8) / 2 * C::kDqPairStride + col % 2, expect)
                    << "warp " << w << " instr " << instr << " lane " << lane << " float " << k;
              }
  }
}

}  // namespace

TEST(Sm80BwdDqOrder, IsAPermutationOfEachBlock) {
  expect_permutation<frag(kSm80BwdD64)>();
  expect_permutation<frag(kSm80BwdD128)>();
  expect_permutation<frag(kSm80BwdD256)>();  // two dQ passes
  expect_permutation<frag(kSm80BwdD64Small)>();
  expect_permutation<frag(kSm80BwdD128Small)>();
  expect_permutation<frag(kSm80BwdD256Small)>();  // one row tile, four warps
  expect_permutation<frag(kSm80BwdD64, true)>();    // red.v4: n8 tile pairs
  expect_permutation<frag(kSm80BwdD128, true)>();
  expect_permutation<frag(kSm80BwdD256, true)>();
}

TEST(Sm80BwdDqOrder, MatchesTheKernelsRedOrder) {
  expect_kernel_order<frag(kSm80BwdD64)>();
  expect_kernel_order<frag(kSm80BwdD128)>();
  expect_kernel_order<frag(kSm80BwdD256)>();
  expect_kernel_order<frag(kSm80BwdD64Small)>();
  expect_kernel_order<frag(kSm80BwdD256Small)>();
  expect_kernel_order<frag(kSm80BwdD64, true)>();
  expect_kernel_order<frag(kSm80BwdD128, true)>();
  expect_kernel_order<frag(kSm80BwdD256, true)>();
}
