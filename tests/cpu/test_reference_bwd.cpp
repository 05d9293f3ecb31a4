// The CPU backward references: the fp64 gradients are the finite differences of the fp64
// forward's loss sum(dout * out) (so the yardstick itself is checked against calculus, not
// against a second implementation), rows that see no key get dq exactly 0, and the
// low-precision backward stays within its dtype's rounding of the fp64 one. Head dims are any
// multiple of 8, and v's head dim Dv may differ from q/k's D (v, out, dout, dv are (.., Dv)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "reference/cpu_reference.h"

using namespace flashattn;
using ref::Problem;

namespace {

// Nonzero mean on purpose: with zero-mean dout the rowsum(dO * O) term of dS is small and a
// reference that dropped it would still look right.
std::vector<double> random_vec(size_t n, uint32_t seed, double mean) {
  std::mt19937 g(seed);
  std::normal_distribution<double> u(mean, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

struct Tensors {
  std::vector<double> q, k, v, dout;
};

// q, dq: (B, Sq, Hq, D); k, dk: (B, Sk, Hkv, D); v, dv: (B, Sk, Hkv, Dv); out, dout:
// (B, Sq, Hq, Dv).
size_t q_elems(const Problem& pr) { return size_t(pr.b) * pr.sq * pr.hq * pr.d; }
size_t k_elems(const Problem& pr) { return size_t(pr.b) * pr.sk * pr.hkv * pr.d; }
size_t v_elems(const Problem& pr) { return size_t(pr.b) * pr.sk * pr.hkv * pr.value_dim(); }
size_t o_elems(const Problem& pr) { return size_t(pr.b) * pr.sq * pr.hq * pr.value_dim(); }

Tensors make_inputs(const Problem& pr, uint32_t seed) {
  return {random_vec(q_elems(pr), seed, 0.5), random_vec(k_elems(pr), seed + 1, 0.5),
          random_vec(v_elems(pr), seed + 2, 0.5), random_vec(o_elems(pr), seed + 3, 0.5)};
}

double loss(const Problem& pr, const Tensors& t) {
  std::vector<double> out(o_elems(pr));
  ref::attention_fp64(pr, t.q.data(), t.k.data(), t.v.data(), out.data(), nullptr);
  double l = 0;
  for (size_t i = 0; i < out.size(); ++i) l += t.dout[i] * out[i];
  return l;
}

bool row_sees_no_key(const Problem& pr, int i) {
  return pr.sk == 0 || (pr.causal && int64_t(i) + pr.sk - pr.sq + 1 <= 0);
}

struct FdCase {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  double scale;
  int dv = 0;  // v's head dim; 0: same as d
};

void PrintTo(const FdCase& c, std::ostream* os) {
  *os << "b" << c.b << "_sq" << c.sq << "_sk" << c.sk << "_h" << c.hq << "x" << c.hkv << "_d"
      << c.d << (c.dv > 0 ? "_dv" + std::to_string(c.dv) : "") << (c.causal ? "_causal" : "")
      << (c.scale > 0 ? "_scaled" : "");
}

Problem problem(const FdCase& c) {
  Problem pr;
  pr.b = c.b; pr.sq = c.sq; pr.sk = c.sk; pr.hq = c.hq; pr.hkv = c.hkv; pr.d = c.d;
  pr.dv = c.dv; pr.causal = c.causal; pr.scale = c.scale;
  return pr;
}

class BackwardFp64 : public ::testing::TestWithParam<FdCase> {};

}  // namespace

TEST_P(BackwardFp64, MatchesFiniteDifferences) {
  const Problem pr = problem(GetParam());
  Tensors t = make_inputs(pr, 7 + pr.sq * 13 + pr.sk);
  std::vector<double> dq(q_elems(pr), std::nan("")), dk(k_elems(pr), std::nan("")),
      dv(v_elems(pr), std::nan(""));
  ref::attention_backward_fp64(pr, t.q.data(), t.k.data(), t.v.data(), t.dout.data(), dq.data(),
                               dk.data(), dv.data());

  // Central differences: truncation ~eps^2, cancellation ~1e-16 |loss| / eps; both far below
  // the tolerance, while a missing term of the gradient is O(1).
  constexpr double kEps = 1e-5, kTol = 1e-6;
  struct Target {
    std::vector<double>* x;
    const std::vector<double>* grad;
    const char* name;
  } targets[] = {{&t.q, &dq, "dq"}, {&t.k, &dk, "dk"}, {&t.v, &dv, "dv"}};
  for (auto& [x, grad, name] : targets) {
    double worst = 0;
    for (size_t e = 0; e < x->size(); ++e) {
      const double x0 = (*x)[e];
      (*x)[e] = x0 + kEps;
      const double up = loss(pr, t);
      (*x)[e] = x0 - kEps;
      const double down = loss(pr, t);
      (*x)[e] = x0;
      const double fd = (up - down) / (2 * kEps);
      const double err = std::fabs(fd - (*grad)[e]);
      worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
    }
    EXPECT_LE(worst, kTol * (1 + std::fabs(loss(pr, t)))) << name;
  }

  for (int b = 0; b < pr.b; ++b)
    for (int i = 0; i < pr.sq; ++i) {
      if (!row_sees_no_key(pr, i)) continue;
      for (int h = 0; h < pr.hq; ++h)
        for (int e = 0; e < pr.d; ++e)
          EXPECT_EQ(dq[((size_t(b) * pr.sq + i) * pr.hq + h) * pr.d + e], 0.0)
              << "row " << i << " sees no key";
    }
}

INSTANTIATE_TEST_SUITE_P(
    SmallShapes, BackwardFp64,
    ::testing::Values(FdCase{1, 1, 1, 1, 1, 4, false, 0.0},
                      FdCase{2, 5, 5, 2, 2, 8, false, 0.0},
                      FdCase{2, 5, 5, 2, 2, 8, true, 0.0},
                      FdCase{1, 4, 7, 2, 1, 8, true, 0.0},   // Sq < Sk: rows see a prefix + diagonal
                      FdCase{1, 7, 4, 4, 2, 8, true, 0.0},   // Sq > Sk: rows 0..2 see no key
                      FdCase{2, 6, 6, 4, 1, 8, true, 0.0},   // MQA
                      FdCase{1, 3, 9, 8, 2, 16, false, 0.0}, // GQA 4
                      FdCase{1, 6, 5, 4, 4, 8, false, 0.3},  // explicit softmax scale
                      // Dv != D: q/k 192 with v 128 (MLA-style), v wider than q/k, small odd pair
                      FdCase{1, 3, 4, 2, 1, 192, false, 0.0, 128},
                      FdCase{1, 4, 3, 2, 2, 64, true, 0.0, 128},  // row 0 sees no key
                      FdCase{2, 5, 5, 2, 1, 40, true, 0.0, 24},
                      FdCase{1, 4, 6, 2, 1, 8, true, 0.3, 40},
                      // Head dims that are multiples of 8 but no power of two
                      FdCase{1, 3, 4, 2, 1, 24, true, 0.0},
                      FdCase{1, 3, 4, 2, 2, 80, false, 0.0},
                      FdCase{1, 2, 3, 2, 1, 96, true, 0.0},
                      FdCase{1, 2, 3, 1, 1, 200, false, 0.3}),
    [](const auto& info) {
      std::ostringstream os;
      PrintTo(info.param, &os);
      return os.str();
    });

namespace {

struct LowpCase {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  DType dt;
  int dv = 0;  // v's head dim; 0: same as d
};

void PrintTo(const LowpCase& c, std::ostream* os) {
  *os << "b" << c.b << "_sq" << c.sq << "_sk" << c.sk << "_h" << c.hq << "x" << c.hkv << "_d"
      << c.d << (c.dv > 0 ? "_dv" + std::to_string(c.dv) : "") << (c.causal ? "_causal" : "")
      << (c.dt == DType::kBFloat16 ? "_bf16" : c.dt == DType::kFloat16 ? "_fp16" : "_fp32");
}

class BackwardLowp : public ::testing::TestWithParam<LowpCase> {};

}  // namespace

// The lowp backward is fed what a forward in `dt` leaves behind (inputs and out in `dt`, lse in
// fp32) and lands within a few of the dtype's units of the exact gradients; with fp32 rounding
// it is the fp64 algorithm up to fp32 noise, which pins down the algorithm itself.
TEST_P(BackwardLowp, CloseToFp64) {
  const LowpCase c = GetParam();
  Problem pr;
  pr.b = c.b; pr.sq = c.sq; pr.sk = c.sk; pr.hq = c.hq; pr.hkv = c.hkv; pr.d = c.d;
  pr.dv = c.dv; pr.causal = c.causal;
  Tensors t = make_inputs(pr, 101 + c.d + 7 * c.dv);
  for (auto* x : {&t.q, &t.k, &t.v, &t.dout})
    for (auto& e : *x) e = ref::round_to(c.dt, e);
  std::vector<double> out(o_elems(pr)), lse(size_t(pr.b) * pr.hq * pr.sq);
  ref::attention_fp64(pr, t.q.data(), t.k.data(), t.v.data(), out.data(), lse.data());
  for (auto& e : out) e = ref::round_to(c.dt, e);
  for (auto& e : lse) e = float(e);

  std::vector<double> dq(q_elems(pr)), dk(k_elems(pr)), dv(v_elems(pr));
  std::vector<double> lq(q_elems(pr), std::nan("")), lk(k_elems(pr), std::nan("")),
      lv(v_elems(pr), std::nan(""));
  ref::attention_backward_fp64(pr, t.q.data(), t.k.data(), t.v.data(), t.dout.data(), dq.data(),
                               dk.data(), dv.data());
  ref::attention_backward_lowp(pr, c.dt, t.q.data(), t.k.data(), t.v.data(), out.data(),
                               lse.data(), t.dout.data(), lq.data(), lk.data(), lv.data());

  // Relative to each tensor's largest entry: a few units of the dtype's last place (bf16 8
  // significant bits, fp16 11), far below what a wrong term would cost.
  const double tol = c.dt == DType::kBFloat16 ? 0.016 : c.dt == DType::kFloat16 ? 2e-3 : 5e-6;
  const std::pair<const std::vector<double>*, const std::vector<double>*> pairs[] = {
      {&lq, &dq}, {&lk, &dk}, {&lv, &dv}};
  const char* names[] = {"dq", "dk", "dv"};
  for (int w = 0; w < 3; ++w) {
    const auto& [low, ref64] = pairs[w];
    double err = 0, mag = 0;
    for (size_t e = 0; e < ref64->size(); ++e) {
      const double d = std::fabs((*low)[e] - (*ref64)[e]);
      err = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(err, d);
      mag = std::max(mag, std::fabs((*ref64)[e]));
    }
    EXPECT_LE(err, tol * mag) << names[w] << " magnitude " << mag;
    // A 16-bit yardstick that matched fp64 exactly would not be rounding anything.
    if (c.dt != DType::kFloat32) {
      EXPECT_GT(err, 0.0) << names[w];
    }
  }

  for (int b = 0; b < pr.b; ++b)
    for (int i = 0; i < pr.sq; ++i) {
      if (!row_sees_no_key(pr, i)) continue;
      for (int h = 0; h < pr.hq; ++h)
        for (int e = 0; e < pr.d; ++e)
          EXPECT_EQ(lq[((size_t(b) * pr.sq + i) * pr.hq + h) * pr.d + e], 0.0)
              << "row " << i << " sees no key";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BackwardLowp,
    ::testing::Values(LowpCase{2, 64, 96, 4, 2, 64, false, DType::kBFloat16},
                      LowpCase{2, 64, 96, 4, 2, 64, true, DType::kFloat16},
                      LowpCase{1, 96, 40, 4, 1, 128, true, DType::kBFloat16},  // rows without keys
                      LowpCase{1, 96, 40, 4, 1, 128, true, DType::kFloat16},
                      LowpCase{1, 33, 130, 8, 1, 96, false, DType::kFloat16},
                      LowpCase{2, 64, 96, 4, 2, 64, true, DType::kFloat32},
                      LowpCase{1, 96, 40, 4, 1, 128, true, DType::kFloat32},
                      // Dv != D
                      LowpCase{1, 40, 56, 4, 2, 192, true, DType::kBFloat16, 128},
                      LowpCase{1, 40, 56, 4, 2, 192, false, DType::kFloat16, 128},
                      LowpCase{2, 33, 47, 2, 1, 64, true, DType::kBFloat16, 128},
                      LowpCase{1, 50, 30, 4, 4, 40, true, DType::kFloat16, 24},  // rows without keys
                      LowpCase{1, 40, 56, 4, 2, 192, true, DType::kFloat32, 128},
                      LowpCase{1, 50, 30, 4, 4, 40, true, DType::kFloat32, 24},
                      // Head dims that are multiples of 8 but no power of two (and 8)
                      LowpCase{1, 33, 47, 2, 1, 8, true, DType::kBFloat16},
                      LowpCase{1, 33, 47, 2, 1, 24, false, DType::kFloat16},
                      LowpCase{1, 33, 47, 2, 2, 80, true, DType::kBFloat16},
                      LowpCase{1, 33, 47, 2, 1, 200, true, DType::kFloat16}),
    [](const auto& info) {
      std::ostringstream os;
      PrintTo(info.param, &os);
      return os.str();
    });
