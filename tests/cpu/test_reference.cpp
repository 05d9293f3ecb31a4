// The tiled online-softmax model agrees with exact attention to 1e-12 over awkward shapes and
// head dims (any multiple of 8, and a v head dim Dv != D); the rounding helpers and the
// correctness rule behave as specified.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include "reference/cpu_reference.h"

using namespace flashattn;
using ref::Problem;

namespace {

std::vector<double> random_vec(size_t n, uint32_t seed, double mean) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(mean - 1.0, mean + 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

struct Case {
  int sq, sk, ratio;
  bool causal;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "sq" << c.sq << "_sk" << c.sk << "_gqa" << c.ratio << (c.causal ? "_causal" : "");
}

class TiledVsExact : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(TiledVsExact, AgreeTo1e12) {
  const Case c = GetParam();
  Problem pr;
  pr.b = 1; pr.sq = c.sq; pr.sk = c.sk; pr.hkv = c.sq * c.sk > 100000 ? 1 : 2;
  pr.hq = pr.hkv * c.ratio; pr.d = 64; pr.causal = c.causal;
  const size_t nq = size_t(pr.b) * pr.sq * pr.hq * pr.d, nk = size_t(pr.b) * pr.sk * pr.hkv * pr.d;
  const auto q = random_vec(nq, 1, 0.2), k = random_vec(nk, 2, 0.1), v = random_vec(nk, 3, 0.3);
  std::vector<double> o_ref(nq), o_tiled(nq), l_ref(size_t(pr.b) * pr.hq * pr.sq), l_tiled(l_ref.size());
  ref::attention_fp64(pr, q.data(), k.data(), v.data(), o_ref.data(), l_ref.data());
  for (auto [bm, bn] : {std::pair{64, 64}, std::pair{128, 80}, std::pair{16, 128}}) {
    std::fill(o_tiled.begin(), o_tiled.end(), std::nan(""));
    std::fill(l_tiled.begin(), l_tiled.end(), std::nan(""));
    ref::attention_tiled(pr, bm, bn, q.data(), k.data(), v.data(), o_tiled.data(), l_tiled.data());
    double max_o = 0, max_l = 0;
    for (size_t i = 0; i < nq; ++i) max_o = std::max(max_o, std::fabs(o_tiled[i] - o_ref[i]));
    for (size_t i = 0; i < l_ref.size(); ++i) {
      if (std::isinf(l_ref[i])) {
        EXPECT_EQ(l_tiled[i], l_ref[i]) << "fully masked row " << i;
        continue;
      }
      max_l = std::max(max_l, std::fabs(l_tiled[i] - l_ref[i]));
    }
    EXPECT_LE(max_o, 1e-12) << "block " << bm << "x" << bn;
    EXPECT_LE(max_l, 1e-12) << "block " << bm << "x" << bn;
    EXPECT_FALSE(std::isnan(max_o));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, TiledVsExact,
    ::testing::Values(Case{1, 1, 1, false}, Case{1, 1, 1, true}, Case{2, 2, 2, true},
                      Case{17, 17, 8, false}, Case{17, 17, 8, true}, Case{113, 113, 2, true},
                      Case{113, 113, 1, false}, Case{1000, 1000, 1, true},
                      Case{1023, 1023, 2, false}, Case{17, 113, 2, true}, Case{113, 17, 8, true},
                      Case{113, 17, 1, false}, Case{1, 1000, 8, true}, Case{1000, 2, 1, true},
                      Case{1023, 17, 2, false}, Case{2, 1023, 1, false}));

TEST(ExactReference, FullyMaskedRowsGiveZeroAndNegInfLse) {
  Problem pr;
  pr.sq = 5; pr.sk = 2; pr.d = 64; pr.causal = true;  // rows 0..2 see no key (bottom-right)
  const auto q = random_vec(5 * 64, 4, 0), k = random_vec(2 * 64, 5, 0), v = random_vec(2 * 64, 6, 0.5);
  std::vector<double> o(5 * 64), lse(5);
  ref::attention_fp64(pr, q.data(), k.data(), v.data(), o.data(), lse.data());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lse[i], -std::numeric_limits<double>::infinity());
    for (int d = 0; d < 64; ++d) EXPECT_EQ(o[i * 64 + d], 0.0);
  }
  EXPECT_TRUE(std::isfinite(lse[3]));
  // Row 3 sees only key 0: out equals v[0].
  for (int d = 0; d < 64; ++d) EXPECT_NEAR(o[3 * 64 + d], v[d], 1e-15);
}

TEST(ExactReference, SingleKeyCopiesValueAndLseIsScaledScore) {
  Problem pr;
  pr.sq = 3; pr.sk = 1; pr.d = 64; pr.scale = 0.25;
  const auto q = random_vec(3 * 64, 7, 0), k = random_vec(64, 8, 0), v = random_vec(64, 9, 0);
  std::vector<double> o(3 * 64), lse(3);
  ref::attention_fp64(pr, q.data(), k.data(), v.data(), o.data(), lse.data());
  for (int i = 0; i < 3; ++i) {
    double dot = 0;
    for (int d = 0; d < 64; ++d) dot += q[i * 64 + d] * k[d];
    EXPECT_NEAR(lse[i], 0.25 * dot, 1e-13);
    for (int d = 0; d < 64; ++d) EXPECT_NEAR(o[i * 64 + d], v[d], 1e-15);
  }
}

TEST(Rounding, Fp16AndBf16) {
  EXPECT_EQ(ref::round_to(DType::kFloat16, 1.0), 1.0);
  EXPECT_EQ(ref::round_to(DType::kFloat16, 1.0 + 1.0 / 4096), 1.0);          // below half ulp
  EXPECT_EQ(ref::round_to(DType::kFloat16, 1.0 + 3.0 / 2048), 1.0 + 2.0 / 1024);  // tie to even
  EXPECT_EQ(ref::round_to(DType::kFloat16, 70000.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(ref::round_to(DType::kFloat16, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));  // subnormal
  EXPECT_EQ(ref::round_to(DType::kBFloat16, 1.0 + 1.0 / 512), 1.0);  // bf16 has 8 bits
  EXPECT_EQ(ref::round_to(DType::kBFloat16, 1.0 + 1.0 / 128), 1.0 + 1.0 / 128);
}

TEST(Rule, AcceptsLowpLevelErrorAndRejectsWorse) {
  const std::vector<double> ref{1.0, 2.0, 3.0}, lowp{1.001, 2.0, 3.0};
  EXPECT_TRUE(ref::check_rule({1.0015, 2.0, 3.0}, ref, lowp, 0).pass);
  EXPECT_FALSE(ref::check_rule({1.0, 2.003, 3.0}, ref, lowp, 0).pass);
  EXPECT_FALSE(ref::check_rule({1.0, std::nan(""), 3.0}, ref, lowp, 1.0).pass);  // NaN never passes
}

TEST(LowpReference, ErrorIsOfInputPrecisionOrder) {
  Problem pr;
  pr.sq = 33; pr.sk = 47; pr.hq = 2; pr.hkv = 1; pr.d = 64; pr.causal = true;
  const size_t nq = 33 * 2 * 64, nk = 47 * 64;
  auto q = random_vec(nq, 10, 0.1), k = random_vec(nk, 11, 0.1), v = random_vec(nk, 12, 0.2);
  for (auto* t : {&q, &k, &v})
    for (auto& x : *t) x = ref::round_to(DType::kBFloat16, x);
  std::vector<double> o(nq), ol(nq);
  ref::attention_fp64(pr, q.data(), k.data(), v.data(), o.data(), nullptr);
  ref::attention_lowp(pr, DType::kBFloat16, q.data(), k.data(), v.data(), ol.data());
  double e = 0;
  for (size_t i = 0; i < nq; ++i) e = std::max(e, std::fabs(o[i] - ol[i]));
  EXPECT_GT(e, 1e-4);  // the rounding is really there
  EXPECT_LT(e, 5e-2);  // and of bf16's order, not a bug
}

// ---- Head dims: any multiple of 8, and Dv != D (v, out are (.., Dv); q, k are (.., D)) ----

namespace {

struct DimCase {
  int d, dv;
};

void PrintTo(const DimCase& c, std::ostream* os) { *os << "d" << c.d << "_dv" << c.dv; }

std::string dim_name(const ::testing::TestParamInfo<DimCase>& info) {
  std::ostringstream os;
  PrintTo(info.param, &os);
  return os.str();
}

class TiledVsExactHeadDims : public ::testing::TestWithParam<DimCase> {};
class LowpHeadDims : public ::testing::TestWithParam<DimCase> {};

const auto kDimCases = ::testing::Values(
    DimCase{192, 128}, DimCase{64, 128}, DimCase{40, 24}, DimCase{128, 64}, DimCase{8, 256},
    DimCase{8, 8}, DimCase{24, 24}, DimCase{80, 80}, DimCase{96, 96}, DimCase{200, 200},
    DimCase{256, 256});

Problem dims_problem(int sq, int sk, int hq, int hkv, bool causal, const DimCase& c) {
  Problem pr;
  pr.sq = sq; pr.sk = sk; pr.hq = hq; pr.hkv = hkv; pr.causal = causal;
  pr.d = c.d; pr.dv = c.dv;
  return pr;
}

}  // namespace

TEST(ProblemDims, DvDefaultsToDAndScaleFollowsD) {
  Problem pr;
  pr.d = 192;
  EXPECT_EQ(pr.value_dim(), 192);
  pr.dv = 128;
  EXPECT_EQ(pr.value_dim(), 128);
  EXPECT_DOUBLE_EQ(pr.effective_scale(), 1.0 / std::sqrt(192.0));  // q.k's dim, not v's
}

// Sq < Sk, Sq > Sk (rows without keys), GQA, and partial tiles, for each (D, Dv).
TEST_P(TiledVsExactHeadDims, AgreeTo1e12) {
  const DimCase c = GetParam();
  for (const auto& [sq, sk, hq, hkv, causal] :
       {std::tuple{17, 113, 4, 2, true}, std::tuple{113, 17, 2, 1, true},
        std::tuple{33, 47, 2, 2, false}}) {
    const Problem pr = dims_problem(sq, sk, hq, hkv, causal, c);
    const size_t nq = size_t(sq) * hq * c.d, nk = size_t(sk) * hkv * c.d,
                 nv = size_t(sk) * hkv * c.dv, no = size_t(sq) * hq * c.dv;
    const auto q = random_vec(nq, 21 + c.d, 0.2), k = random_vec(nk, 22 + c.dv, 0.1),
               v = random_vec(nv, 23, 0.3);
    std::vector<double> o_ref(no, std::nan("")), l_ref(size_t(hq) * sq, std::nan(""));
    ref::attention_fp64(pr, q.data(), k.data(), v.data(), o_ref.data(), l_ref.data());
    for (auto [bm, bn] : {std::pair{64, 64}, std::pair{128, 80}, std::pair{16, 128}}) {
      std::vector<double> o_tiled(no, std::nan("")), l_tiled(l_ref.size(), std::nan(""));
      ref::attention_tiled(pr, bm, bn, q.data(), k.data(), v.data(), o_tiled.data(),
                           l_tiled.data());
      double max_o = 0, max_l = 0;
      for (size_t i = 0; i < no; ++i) {
        const double e = std::fabs(o_tiled[i] - o_ref[i]);
        max_o = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(max_o, e);
      }
      for (size_t i = 0; i < l_ref.size(); ++i) {
        if (std::isinf(l_ref[i])) {
          EXPECT_EQ(l_tiled[i], l_ref[i]) << "fully masked row " << i;
          continue;
        }
        const double e = std::fabs(l_tiled[i] - l_ref[i]);
        max_l = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(max_l, e);
      }
      EXPECT_LE(max_o, 1e-12) << "sq " << sq << " sk " << sk << " block " << bm << "x" << bn;
      EXPECT_LE(max_l, 1e-12) << "sq " << sq << " sk " << sk << " block " << bm << "x" << bn;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dims, TiledVsExactHeadDims, kDimCases, dim_name);

// v's columns are independent: out for v = [v1 | v2] is [out(v1) | out(v2)], each computed
// with Dv == D when the halves are D wide, and lse does not depend on v at all. This ties the
// Dv != D path to the long-tested Dv == D one without a second implementation.
TEST(ExactReference, SplitValueColumnsMatchTheirOwnAttention) {
  const int sq = 13, sk = 29, hq = 4, hkv = 2, d = 64;
  const int widths[2] = {64, 64};  // v is 128 wide: two D-wide halves
  Problem pr = dims_problem(sq, sk, hq, hkv, true, DimCase{d, widths[0] + widths[1]});
  const int dv = pr.value_dim();
  const auto q = random_vec(size_t(sq) * hq * d, 31, 0.1),
             k = random_vec(size_t(sk) * hkv * d, 32, 0.2),
             v = random_vec(size_t(sk) * hkv * dv, 33, -0.3);
  std::vector<double> o(size_t(sq) * hq * dv), lse(size_t(hq) * sq);
  ref::attention_fp64(pr, q.data(), k.data(), v.data(), o.data(), lse.data());

  int col0 = 0;
  for (const int w : widths) {
    Problem half = pr;
    half.dv = w;
    std::vector<double> vh(size_t(sk) * hkv * w), oh(size_t(sq) * hq * w), lh(lse.size());
    for (size_t row = 0; row < size_t(sk) * hkv; ++row)
      std::copy_n(v.begin() + row * dv + col0, w, vh.begin() + row * w);
    ref::attention_fp64(half, q.data(), k.data(), vh.data(), oh.data(), lh.data());
    for (size_t row = 0; row < size_t(sq) * hq; ++row)
      for (int e = 0; e < w; ++e)
        EXPECT_EQ(o[row * dv + col0 + e], oh[row * w + e]) << "row " << row << " col " << col0 + e;
    for (size_t i = 0; i < lse.size(); ++i) EXPECT_EQ(lse[i], lh[i]) << "lse " << i;
    col0 += w;
  }
}

TEST(ExactReference, SingleKeyCopiesValueWhenDvDiffers) {
  for (const DimCase c : {DimCase{192, 128}, DimCase{40, 24}, DimCase{8, 200}}) {
    Problem pr = dims_problem(3, 1, 2, 1, false, c);
    const auto q = random_vec(size_t(3) * 2 * c.d, 41, 0), k = random_vec(size_t(c.d), 42, 0),
               v = random_vec(size_t(c.dv), 43, 0.5);
    std::vector<double> o(size_t(3) * 2 * c.dv, std::nan("")), lse(6);
    ref::attention_fp64(pr, q.data(), k.data(), v.data(), o.data(), lse.data());
    // Every (row, head) of out is v's only row; lse (Hq, Sq) is the score scaled by
    // 1/sqrt(d), q.k's head dim.
    for (size_t row = 0; row < 6; ++row)
      for (int e = 0; e < c.dv; ++e)
        EXPECT_NEAR(o[row * c.dv + e], v[e], 1e-15) << c.d << "/" << c.dv;
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 3; ++i) {
        double dot = 0;
        for (int e = 0; e < c.d; ++e) dot += q[(size_t(i) * 2 + h) * c.d + e] * k[e];
        EXPECT_NEAR(lse[size_t(h) * 3 + i], dot / std::sqrt(double(c.d)), 1e-12)
            << c.d << "/" << c.dv;
      }
  }
}

// The input-precision reference stays within bf16's order of the exact one for every
// (D, Dv), and is not accidentally exact.
TEST_P(LowpHeadDims, ErrorIsOfInputPrecisionOrder) {
  const DimCase c = GetParam();
  const Problem pr = dims_problem(33, 47, 2, 1, true, c);
  const size_t nq = size_t(33) * 2 * c.d, nk = size_t(47) * c.d, nv = size_t(47) * c.dv,
               no = size_t(33) * 2 * c.dv;
  auto q = random_vec(nq, 50 + c.d, 0.1), k = random_vec(nk, 51, 0.1), v = random_vec(nv, 52, 0.2);
  for (auto* t : {&q, &k, &v})
    for (auto& x : *t) x = ref::round_to(DType::kBFloat16, x);
  std::vector<double> o(no), ol(no, std::nan(""));
  ref::attention_fp64(pr, q.data(), k.data(), v.data(), o.data(), nullptr);
  ref::attention_lowp(pr, DType::kBFloat16, q.data(), k.data(), v.data(), ol.data());
  double e = 0;
  for (size_t i = 0; i < no; ++i) {
    const double x = std::fabs(o[i] - ol[i]);
    e = std::isnan(x) ? std::numeric_limits<double>::infinity() : std::max(e, x);
  }
  EXPECT_GT(e, 1e-4);
  EXPECT_LT(e, 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Dims, LowpHeadDims, kDimCases, dim_name);
