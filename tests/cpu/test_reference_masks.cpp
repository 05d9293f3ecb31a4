// Issue 17 in the CPU references: sliding window, softcap and ALiBi. Each reference (fp64
// forward, tiled forward, input-precision forward, fp64 and input-precision backward) is checked
// against a brute force written here straight from the rule: the full (Sq x Sk) score matrix of
// every (batch, head), element by element (scale * q.k, softcap * tanh(s / softcap), minus
// slope * |i + Sk - Sq - j|, -inf where the window or causal hides the key), then a plain softmax.
// The fp64 backward is also checked against central finite differences of that brute force.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "reference/cpu_reference.h"

using namespace flashattn;
using ref::Problem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_vec(size_t n, uint32_t seed, double mean, double spread = 1.0) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(mean - spread, mean + spread);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// The brute force. q (B, Sq, Hq, D), k (B, Sk, Hkv, D), v (B, Sk, Hkv, Dv), contiguous.
struct Brute {
  std::vector<double> out, lse;
};
Brute brute_force(const Problem& pr, const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v) {
  const int D = pr.d, DV = pr.value_dim(), ratio = pr.hq / pr.hkv;
  const double scale = pr.scale > 0 ? pr.scale : 1.0 / std::sqrt(double(D));
  Brute r;
  r.out.assign(size_t(pr.b) * pr.sq * pr.hq * DV, 0.0);
  r.lse.assign(size_t(pr.b) * pr.hq * pr.sq, 0.0);
  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.hq; ++h) {
      const int hk = h / ratio;
      std::vector<double> S(size_t(pr.sq) * pr.sk);
      for (int i = 0; i < pr.sq; ++i)
        for (int j = 0; j < pr.sk; ++j) {
          const long long diag = (long long)i + pr.sk - pr.sq;
          bool seen = true;
          if (pr.causal && j > diag) seen = false;
          if (pr.window_left >= 0 && j < diag - pr.window_left) seen = false;
          if (pr.window_right >= 0 && j > diag + pr.window_right) seen = false;
          double s = 0;
          for (int e = 0; e < D; ++e)
            s += q[((size_t(b) * pr.sq + i) * pr.hq + h) * D + e] * k[((size_t(b) * pr.sk + j) * pr.hkv + hk) * D + e];
          s *= scale;
          if (pr.softcap > 0) s = pr.softcap * std::tanh(s / pr.softcap);
          if (!pr.alibi_slopes.empty())
            s += -pr.alibi_slopes[size_t(b * pr.alibi_batch_stride + h)] * std::fabs(double(diag - j));
          S[size_t(i) * pr.sk + j] = seen ? s : -kInf;
        }
      for (int i = 0; i < pr.sq; ++i) {
        const double* row = &S[size_t(i) * pr.sk];
        double mx = -kInf;
        for (int j = 0; j < pr.sk; ++j) mx = std::max(mx, row[j]);
        double* o = &r.out[((size_t(b) * pr.sq + i) * pr.hq + h) * DV];
        double& l = r.lse[(size_t(b) * pr.hq + h) * pr.sq + i];
        if (mx == -kInf) {
          l = -kInf;  // no key: out stays 0
          continue;
        }
        double sum = 0;
        for (int j = 0; j < pr.sk; ++j) sum += std::exp(row[j] - mx);
        for (int j = 0; j < pr.sk; ++j) {
          const double p = std::exp(row[j] - mx) / sum;
          for (int e = 0; e < DV; ++e) o[e] += p * v[((size_t(b) * pr.sk + j) * pr.hkv + hk) * DV + e];
        }
        l = mx + std::log(sum);
      }
    }
  return r;
}

struct Window {
  int left, right;
};
const std::vector<Window> kWindows = {{-1, -1}, {0, 0},   {1, 0},   {127, 0}, {256, 256},
                                      {1000, 3}, {-1, 0}, {5, -1}, {3, 2},   {0, 6}};
struct Lens {
  int sq, sk;
};
const std::vector<Lens> kLens = {{1, 1}, {17, 17}, {9, 40}, {40, 9}, {130, 130}, {33, 300}, {300, 33}};

// A problem of the grid: hq 4 over hkv 2 (GQA), batch 2, d 16, dv 8.
Problem make(const Lens& ln, const Window& w, bool causal, double softcap, int alibi) {
  Problem pr;
  pr.b = 2; pr.sq = ln.sq; pr.sk = ln.sk; pr.hq = 4; pr.hkv = 2; pr.d = 16; pr.dv = 8;
  pr.causal = causal;
  pr.window_left = w.left;
  pr.window_right = w.right;
  pr.softcap = softcap;
  if (alibi == 1) {  // one (Hq,) vector
    pr.alibi_slopes = {0.5, 0.25, 0.125, 0.0625};
    pr.alibi_batch_stride = 0;
  } else if (alibi == 2) {  // (B, Hq)
    pr.alibi_slopes = {0.5, 0.3, 0.1, 0.02, 0.07, 0.9, 0.2, 0.04};
    pr.alibi_batch_stride = pr.hq;
  }
  return pr;
}

std::string label(const Problem& pr) {
  std::ostringstream s;
  s << pr.sq << "x" << pr.sk << " window (" << pr.window_left << "," << pr.window_right << ")"
    << (pr.causal ? " causal" : "") << " softcap " << pr.softcap << " alibi " << pr.alibi_slopes.size()
    << "/" << pr.alibi_batch_stride;
  return s.str();
}

struct Inputs {
  std::vector<double> q, k, v;
};
Inputs inputs(const Problem& pr, uint32_t seed) {
  const size_t nq = size_t(pr.b) * pr.sq * pr.hq * pr.d, nk = size_t(pr.b) * pr.sk * pr.hkv * pr.d,
               nv = size_t(pr.b) * pr.sk * pr.hkv * pr.value_dim();
  // Large enough scores that softcap 2 bends them (|scale * q.k| reaches several units).
  return {random_vec(nq, seed, 0.3, 1.5), random_vec(nk, seed + 1, 0.2, 1.5), random_vec(nv, seed + 2, 0.3)};
}

// out and lse of a reference against the brute force: lse -inf exactly where it is -inf there.
void expect_close(const Problem& pr, const Brute& bf, const std::vector<double>& out, const std::vector<double>* lse,
                  double tol, const std::string& what) {
  double err = 0;
  for (size_t i = 0; i < bf.out.size(); ++i) {
    ASSERT_FALSE(std::isnan(out[i])) << what << " " << label(pr) << " out " << i;
    err = std::max(err, std::fabs(out[i] - bf.out[i]));
  }
  EXPECT_LE(err, tol) << what << " " << label(pr);
  if (lse == nullptr) return;
  for (size_t i = 0; i < bf.lse.size(); ++i) {
    if (bf.lse[i] == -kInf) {
      ASSERT_EQ((*lse)[i], -kInf) << what << " " << label(pr) << " lse " << i;
    } else {
      ASSERT_LE(std::fabs((*lse)[i] - bf.lse[i]), tol) << what << " " << label(pr) << " lse " << i;
    }
  }
}

}  // namespace

TEST(ReferenceMasks, ForwardsMatchTheBruteForceOverTheGrid) {
  int cases = 0;
  for (const Lens& ln : kLens)
    for (const Window& w : kWindows)
      for (bool causal : {false, true})
        for (double softcap : {0.0, 2.0})
          for (int alibi : {0, 1, 2}) {
            // Not every combination at every length: the full cross product at the short ones.
            if (ln.sq * ln.sk > 5000 && (softcap > 0) != (alibi > 0)) continue;
            const Problem pr = make(ln, w, causal, softcap, alibi);
            const Inputs in = inputs(pr, 11 + cases);
            const Brute bf = brute_force(pr, in.q, in.k, in.v);
            std::vector<double> out(bf.out.size(), std::nan("")), lse(bf.lse.size(), std::nan(""));
            ref::attention_fp64(pr, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
            expect_close(pr, bf, out, &lse, 1e-12, "fp64");
            for (auto [bm, bn] : {std::pair{16, 16}, std::pair{64, 48}, std::pair{128, 176}}) {
              std::fill(out.begin(), out.end(), std::nan(""));
              std::fill(lse.begin(), lse.end(), std::nan(""));
              ref::attention_tiled(pr, bm, bn, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
              expect_close(pr, bf, out, &lse, 1e-12, "tiled " + std::to_string(bm) + "x" + std::to_string(bn));
            }
            // The input-precision form at fp32 is the same attention to fp32 rounding.
            std::fill(out.begin(), out.end(), std::nan(""));
            ref::attention_lowp(pr, DType::kFloat32, in.q.data(), in.k.data(), in.v.data(), out.data());
            expect_close(pr, bf, out, nullptr, 2e-5, "lowp fp32");
            if (HasFatalFailure()) return;
            ++cases;
          }
  EXPECT_GT(cases, 500);
}

// The features really change the answer (a reference that ignored them would pass the test
// above only if the brute force ignored them too; this pins the brute force).
TEST(ReferenceMasks, EachFeatureChangesTheOutput) {
  const Problem plain = make({40, 40}, {-1, -1}, false, 0.0, 0);
  const Inputs in = inputs(plain, 5);
  const Brute base = brute_force(plain, in.q, in.k, in.v);
  for (const Problem& pr : {make({40, 40}, {3, 3}, false, 0.0, 0), make({40, 40}, {-1, -1}, false, 2.0, 0),
                            make({40, 40}, {-1, -1}, false, 0.0, 1), make({40, 40}, {-1, -1}, false, 0.0, 2)}) {
    std::vector<double> out(base.out.size());
    ref::attention_fp64(pr, in.q.data(), in.k.data(), in.v.data(), out.data(), nullptr);
    double diff = 0;
    for (size_t i = 0; i < out.size(); ++i) diff = std::max(diff, std::fabs(out[i] - base.out[i]));
    EXPECT_GT(diff, 1e-3) << label(pr);
  }
  // A (B, Hq) slope tensor is read per batch: batch 1 differs from the (Hq,) reading of row 0.
  Problem per_b = make({40, 40}, {-1, -1}, false, 0.0, 2), shared = per_b;
  shared.alibi_batch_stride = 0;
  std::vector<double> o1(base.out.size()), o2(base.out.size());
  ref::attention_fp64(per_b, in.q.data(), in.k.data(), in.v.data(), o1.data(), nullptr);
  ref::attention_fp64(shared, in.q.data(), in.k.data(), in.v.data(), o2.data(), nullptr);
  const size_t half = o1.size() / 2;
  for (size_t i = 0; i < half; ++i) ASSERT_EQ(o1[i], o2[i]);
  double diff = 0;
  for (size_t i = half; i < o1.size(); ++i) diff = std::max(diff, std::fabs(o1[i] - o2[i]));
  EXPECT_GT(diff, 1e-3);
}

// Rows that see no key (Sq > Sk with right bounded, and a causal window): out 0, lse -inf, and
// in the backward dq 0 for them, nothing NaN, and dk/dv only from rows that see keys.
TEST(ReferenceMasks, RowsWithoutKeysGiveZeroAndNegInfAndNoGradient) {
  for (const Window& w : {Window{2, 0}, Window{-1, 1}, Window{0, 0}}) {
    Problem pr = make({20, 5}, w, true, 2.0, 2);
    const Inputs in = inputs(pr, 7);
    const int DV = pr.value_dim();
    std::vector<double> out(size_t(pr.b) * pr.sq * pr.hq * DV), lse(size_t(pr.b) * pr.hq * pr.sq);
    ref::attention_fp64(pr, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
    const auto dout = random_vec(out.size(), 9, 0.1);
    std::vector<double> dq(in.q.size(), std::nan("")), dk(in.k.size(), std::nan("")), dv(in.v.size(), std::nan(""));
    ref::attention_backward_fp64(pr, in.q.data(), in.k.data(), in.v.data(), dout.data(), dq.data(), dk.data(),
                                 dv.data());
    std::vector<double> dq_l(dq.size()), dk_l(dk.size()), dv_l(dv.size());
    ref::attention_backward_lowp(pr, DType::kFloat32, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(),
                                 dout.data(), dq_l.data(), dk_l.data(), dv_l.data());
    int empty_rows = 0;
    for (int b = 0; b < pr.b; ++b)
      for (int h = 0; h < pr.hq; ++h)
        for (int i = 0; i < pr.sq; ++i) {
          // Causal with right <= 0 of the window: row i's last key is i + sk - sq, none if < 0.
          const bool empty = i + pr.sk - pr.sq < 0;
          const double l = lse[(size_t(b) * pr.hq + h) * pr.sq + i];
          ASSERT_EQ(l == -kInf, empty) << label(pr) << " row " << i;
          if (!empty) continue;
          ++empty_rows;
          for (int e = 0; e < DV; ++e) ASSERT_EQ(out[((size_t(b) * pr.sq + i) * pr.hq + h) * DV + e], 0.0);
          for (int e = 0; e < pr.d; ++e) {
            ASSERT_EQ(dq[((size_t(b) * pr.sq + i) * pr.hq + h) * pr.d + e], 0.0);
            ASSERT_EQ(dq_l[((size_t(b) * pr.sq + i) * pr.hq + h) * pr.d + e], 0.0);
          }
        }
    EXPECT_EQ(empty_rows, pr.b * pr.hq * 15);
    for (const auto* g : {&dq, &dk, &dv, &dq_l, &dk_l, &dv_l})
      for (double x : *g) ASSERT_FALSE(std::isnan(x)) << label(pr);
  }
  // A key no row sees (left of every window) gets dk = dv = 0.
  Problem pr = make({8, 30}, {2, 0}, false, 0.0, 1);
  const Inputs in = inputs(pr, 3);
  const int DV = pr.value_dim();
  const auto dout = random_vec(size_t(pr.b) * pr.sq * pr.hq * DV, 4, 0.1);
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  ref::attention_backward_fp64(pr, in.q.data(), in.k.data(), in.v.data(), dout.data(), dq.data(), dk.data(), dv.data());
  for (int b = 0; b < pr.b; ++b)
    for (int j = 0; j < pr.sk; ++j)
      for (int hk = 0; hk < pr.hkv; ++hk) {
        const bool seen = j >= pr.sk - pr.sq - 2;  // the first row's window starts there
        double mx = 0;
        for (int e = 0; e < pr.d; ++e) mx = std::max(mx, std::fabs(dk[((size_t(b) * pr.sk + j) * pr.hkv + hk) * pr.d + e]));
        for (int e = 0; e < DV; ++e) mx = std::max(mx, std::fabs(dv[((size_t(b) * pr.sk + j) * pr.hkv + hk) * DV + e]));
        if (seen) {
          EXPECT_GT(mx, 0.0) << "key " << j;
        } else {
          EXPECT_EQ(mx, 0.0) << "key " << j;
        }
      }
}

// The fp64 backward against central differences of the brute force's loss sum(dout * out), for
// every input element, under each feature alone and all together (GQA: dk/dv sum the group).
TEST(ReferenceMasks, BackwardMatchesFiniteDifferences) {
  struct FdCase {
    Lens ln;
    Window w;
    bool causal;
    double softcap;
    int alibi;
  };
  const std::vector<FdCase> grid = {
      {{6, 6}, {1, 0}, false, 0.0, 0},   {{5, 9}, {2, 1}, false, 0.0, 0},   {{9, 5}, {-1, 1}, false, 0.0, 0},
      {{7, 7}, {-1, -1}, false, 2.0, 0}, {{7, 7}, {-1, -1}, false, 0.0, 1}, {{6, 8}, {-1, -1}, true, 0.0, 2},
      {{8, 6}, {3, -1}, true, 1.5, 2},   {{7, 9}, {2, 2}, false, 1.0, 1},   {{9, 4}, {1, 0}, true, 2.0, 2}};
  for (const FdCase& c : grid) {
    Problem pr = make(c.ln, c.w, c.causal, c.softcap, c.alibi);
    pr.d = 8;
    pr.dv = 4;
    Inputs in = inputs(pr, 21);
    const int DV = pr.value_dim();
    const auto dout = random_vec(size_t(pr.b) * pr.sq * pr.hq * DV, 23, 0.1);
    std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
    ref::attention_backward_fp64(pr, in.q.data(), in.k.data(), in.v.data(), dout.data(), dq.data(), dk.data(),
                                 dv.data());
    auto loss = [&]() {
      const Brute bf = brute_force(pr, in.q, in.k, in.v);
      double s = 0;
      for (size_t i = 0; i < bf.out.size(); ++i) s += dout[i] * bf.out[i];
      return s;
    };
    double max_grad = 0;
    auto check = [&](std::vector<double>& x, const std::vector<double>& g, const char* name) {
      constexpr double h = 1e-5;
      for (size_t e = 0; e < x.size(); ++e) {
        const double x0 = x[e];
        x[e] = x0 + h;
        const double lp = loss();
        x[e] = x0 - h;
        const double lm = loss();
        x[e] = x0;
        const double fd = (lp - lm) / (2 * h);
        max_grad = std::max(max_grad, std::fabs(g[e]));
        ASSERT_NEAR(g[e], fd, 1e-7 + 1e-6 * std::fabs(fd)) << label(pr) << " " << name << "[" << e << "]";
      }
    };
    check(in.q, dq, "dq");
    check(in.k, dk, "dk");
    check(in.v, dv, "dv");
    EXPECT_GT(max_grad, 1e-3) << label(pr);  // not a vacuous pass
  }
}

// The input-precision backward at fp32 is the fp64 backward to fp32 rounding, with every feature.
TEST(ReferenceMasks, LowpBackwardAtFp32MatchesFp64) {
  for (const Lens& ln : {Lens{17, 17}, Lens{9, 40}, Lens{40, 9}})
    for (const Window& w : {Window{-1, -1}, Window{3, 2}, Window{1, 0}, Window{5, -1}})
      for (bool causal : {false, true})
        for (double softcap : {0.0, 2.0})
          for (int alibi : {0, 2}) {
            const Problem pr = make(ln, w, causal, softcap, alibi);
            const Inputs in = inputs(pr, 31);
            const int DV = pr.value_dim();
            std::vector<double> out(size_t(pr.b) * pr.sq * pr.hq * DV), lse(size_t(pr.b) * pr.hq * pr.sq);
            ref::attention_fp64(pr, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
            const auto dout = random_vec(out.size(), 33, 0.1);
            std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
            std::vector<double> dq_l(dq.size()), dk_l(dk.size()), dv_l(dv.size());
            ref::attention_backward_fp64(pr, in.q.data(), in.k.data(), in.v.data(), dout.data(), dq.data(), dk.data(),
                                         dv.data());
            ref::attention_backward_lowp(pr, DType::kFloat32, in.q.data(), in.k.data(), in.v.data(), out.data(),
                                         lse.data(), dout.data(), dq_l.data(), dk_l.data(), dv_l.data());
            for (auto [a, b] : {std::pair{&dq, &dq_l}, std::pair{&dk, &dk_l}, std::pair{&dv, &dv_l}})
              for (size_t e = 0; e < a->size(); ++e)
                ASSERT_NEAR((*a)[e], (*b)[e], 1e-4 + 1e-4 * std::fabs((*a)[e])) << label(pr) << " element " << e;
          }
}
