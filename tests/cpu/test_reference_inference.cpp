// The serving-side references (reference/cpu_reference_inference.h) against an independent
// brute force written here from FlashAttention 2's rules (bottom-right causal per sequence), on
// zero-length and length-1 sequences, very unequal lengths, GQA and Dv != D; and the KV cache's
// append, its untouched slots (NaN past the visible keys must not leak) and paged == contiguous.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "reference/cpu_reference_inference.h"

using namespace flashattn;

namespace {

std::vector<double> random_vec(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-0.5, 1.5);  // mean 0.5
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// One query row against keys [0, n) of a sequence: rows are (H, width) blocks; out (dv), lse.
void brute_row(const double* qrow, const double* keys, const double* vals, int n, int hkv, int hk, int d,
               int dv, double scale, double* out, double* lse) {
  std::vector<double> w(static_cast<size_t>(n));
  double mx = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < n; ++j) {
    double s = 0;
    for (int e = 0; e < d; ++e) s += qrow[e] * keys[(static_cast<int64_t>(j) * hkv + hk) * d + e];
    w[j] = s * scale;
    mx = std::max(mx, w[j]);
  }
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
  for (int e = 0; e < dv; ++e) {
    double acc = 0;
    for (int j = 0; j < n; ++j) acc += w[j] * vals[(static_cast<int64_t>(j) * hkv + hk) * dv + e];
    out[e] = n > 0 ? acc / sum : 0.0;
  }
  *lse = n > 0 ? mx + std::log(sum) : -std::numeric_limits<double>::infinity();
}

// Visible keys of query t of a sequence with sq queries and sk keys.
int visible(bool causal, int t, int sq, int sk) {
  return causal ? std::clamp(t + sk - sq + 1, 0, sk) : sk;
}

struct VarlenCase {
  std::vector<int32_t> lq, lk;
  int hq, hkv, d, dv;
  bool causal;
};

}  // namespace

TEST(ReferenceInference, VarlenMatchesBruteForcePerSequence) {
  const VarlenCase cases[] = {
      {{5, 0, 1, 17}, {9, 3, 1, 17}, 4, 2, 16, 16, true},    // zero-length and length-1 queries
      {{5, 0, 1, 17}, {9, 3, 1, 17}, 4, 2, 16, 16, false},
      {{3, 7, 2}, {0, 7, 40}, 2, 2, 8, 24, true},              // a sequence without keys; Dv != D
      {{40, 1, 1, 1, 1}, {2, 40, 1, 1, 3}, 6, 1, 24, 8, true}, // very unequal, MQA, Sq > Sk
      {{12, 6}, {6, 12}, 3, 3, 8, 8, false},
  };
  uint32_t seed = 1;
  for (const VarlenCase& c : cases) {
    const int b = static_cast<int>(c.lq.size());
    std::vector<int32_t> cu_q(b + 1, 0), cu_k(b + 1, 0);
    std::partial_sum(c.lq.begin(), c.lq.end(), cu_q.begin() + 1);
    std::partial_sum(c.lk.begin(), c.lk.end(), cu_k.begin() + 1);
    const int tq = cu_q[b], tk = cu_k[b];
    const auto q = random_vec(static_cast<size_t>(tq) * c.hq * c.d, seed++);
    const auto k = random_vec(static_cast<size_t>(tk) * c.hkv * c.d, seed++);
    const auto v = random_vec(static_cast<size_t>(tk) * c.hkv * c.dv, seed++);
    std::vector<double> out(static_cast<size_t>(tq) * c.hq * c.dv, std::nan("")),
        lse(static_cast<size_t>(c.hq) * tq, std::nan(""));
    ref::VarlenProblem pr;
    pr.b = b;
    pr.hq = c.hq;
    pr.hkv = c.hkv;
    pr.d = c.d;
    pr.dv = c.dv;
    pr.causal = c.causal;
    ref::attention_varlen_fp64(pr, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(), out.data(),
                               lse.data());
    const double scale = 1.0 / std::sqrt(double(c.d));
    std::vector<double> want(c.dv);
    for (int i = 0; i < b; ++i)
      for (int t = 0; t < c.lq[i]; ++t)
        for (int h = 0; h < c.hq; ++h) {
          const int64_t row = cu_q[i] + t;
          const int hk = h / (c.hq / c.hkv);
          double want_lse = 0;
          brute_row(&q[(row * c.hq + h) * c.d], &k[static_cast<int64_t>(cu_k[i]) * c.hkv * c.d],
                    &v[static_cast<int64_t>(cu_k[i]) * c.hkv * c.dv], visible(c.causal, t, c.lq[i], c.lk[i]), c.hkv,
                    hk, c.d, c.dv, scale, want.data(), &want_lse);
          for (int e = 0; e < c.dv; ++e)
            EXPECT_NEAR(out[(row * c.hq + h) * c.dv + e], want[e], 1e-12) << "seq " << i << " row " << t;
          const double got_lse = lse[static_cast<int64_t>(h) * tq + row];
          if (std::isinf(want_lse)) {
            EXPECT_TRUE(std::isinf(got_lse) && got_lse < 0) << "seq " << i << " row " << t;
          } else {
            EXPECT_NEAR(got_lse, want_lse, 1e-12);
          }
        }
  }
}

namespace {

struct CacheSetup {
  ref::KvCacheProblem pr;
  std::vector<int32_t> seqlens, table;
  std::vector<double> kc, vc, kn, vn, q;
};

// A cache of b sequences with the given lengths; slots past each length hold NaN. Paged with
// page size `page` (0: contiguous) through a shuffled block table.
CacheSetup make_cache(const std::vector<int32_t>& lens, int s_new, int sq, int page, bool causal, uint32_t seed) {
  CacheSetup c;
  ref::KvCacheProblem& pr = c.pr;
  pr.b = static_cast<int>(lens.size());
  pr.sq = sq;
  pr.hq = 4;
  pr.hkv = 2;
  pr.d = 16;
  pr.dv = 8;
  pr.causal = causal;
  pr.s_new = s_new;
  const int cap = *std::max_element(lens.begin(), lens.end()) + s_new + 3;
  c.seqlens = lens;
  int64_t rows = 0;
  if (page == 0) {
    pr.s_cache = cap;
    rows = static_cast<int64_t>(pr.b) * cap;
  } else {
    pr.page_size = page;
    pr.max_pages = (cap + page - 1) / page;
    const int pages = pr.b * pr.max_pages + 2;  // two pages nobody owns
    std::vector<int32_t> ids(pages);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    c.table.assign(ids.begin(), ids.begin() + static_cast<int64_t>(pr.b) * pr.max_pages);
    rows = static_cast<int64_t>(pages) * page;
  }
  c.kc.assign(static_cast<size_t>(rows) * pr.hkv * pr.d, std::nan(""));
  c.vc.assign(static_cast<size_t>(rows) * pr.hkv * pr.dv, std::nan(""));
  // The cached keys: the same values for contiguous and paged caches of the same seed.
  const auto k_all = random_vec(static_cast<size_t>(pr.b) * cap * pr.hkv * pr.d, seed + 1);
  const auto v_all = random_vec(static_cast<size_t>(pr.b) * cap * pr.hkv * pr.dv, seed + 2);
  for (int b = 0; b < pr.b; ++b)
    for (int j = 0; j < lens[b]; ++j) {
      const int64_t row = page == 0 ? static_cast<int64_t>(b) * cap + j
                                    : static_cast<int64_t>(c.table[b * pr.max_pages + j / page]) * page + j % page;
      const int64_t src = static_cast<int64_t>(b) * cap + j;
      std::copy_n(&k_all[src * pr.hkv * pr.d], pr.hkv * pr.d, &c.kc[row * pr.hkv * pr.d]);
      std::copy_n(&v_all[src * pr.hkv * pr.dv], pr.hkv * pr.dv, &c.vc[row * pr.hkv * pr.dv]);
    }
  c.kn = random_vec(static_cast<size_t>(pr.b) * s_new * pr.hkv * pr.d, seed + 3);
  c.vn = random_vec(static_cast<size_t>(pr.b) * s_new * pr.hkv * pr.dv, seed + 4);
  c.q = random_vec(static_cast<size_t>(pr.b) * sq * pr.hq * pr.d, seed + 5);
  return c;
}

}  // namespace

TEST(ReferenceInference, KvCacheAppendsAndAttendsToVisibleKeysOnly) {
  for (bool causal : {false, true})
    for (int page : {0, 16, 64})
      for (int sq : {1, 4}) {
        CacheSetup c = make_cache({0, 5, 37, 100}, /*s_new=*/sq, sq, page, causal, 7);
        const ref::KvCacheProblem& pr = c.pr;
        std::vector<double> out(static_cast<size_t>(pr.b) * sq * pr.hq * pr.dv, std::nan("")),
            lse(static_cast<size_t>(pr.b) * pr.hq * sq, std::nan(""));
        const std::vector<double> kc0 = c.kc;
        ref::attention_kvcache_fp64(pr, c.seqlens.data(), page ? c.table.data() : nullptr, c.kc.data(), c.vc.data(),
                                    c.kn.data(), c.vn.data(), c.q.data(), out.data(), lse.data());
        for (double x : out) ASSERT_FALSE(std::isnan(x)) << "a NaN slot past the visible keys leaked";
        // The cache changed exactly at the appended rows (NaN compares unequal to itself).
        auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
        int64_t changed = 0;
        for (size_t i = 0; i < kc0.size(); ++i) changed += !same(kc0[i], c.kc[i]);
        EXPECT_EQ(changed, static_cast<int64_t>(pr.b) * sq * pr.hkv * pr.d);
        // Against the brute force over the gathered keys of each sequence.
        const double scale = 1.0 / std::sqrt(double(pr.d));
        for (int b = 0; b < pr.b; ++b) {
          const int len = c.seqlens[b] + sq;
          std::vector<double> keys(static_cast<size_t>(len) * pr.hkv * pr.d), vals(static_cast<size_t>(len) * pr.hkv * pr.dv);
          for (int j = 0; j < len; ++j) {
            const int64_t row = page == 0 ? static_cast<int64_t>(b) * pr.s_cache + j
                                          : static_cast<int64_t>(c.table[b * pr.max_pages + j / page]) * page + j % page;
            std::copy_n(&c.kc[row * pr.hkv * pr.d], pr.hkv * pr.d, &keys[static_cast<int64_t>(j) * pr.hkv * pr.d]);
            std::copy_n(&c.vc[row * pr.hkv * pr.dv], pr.hkv * pr.dv, &vals[static_cast<int64_t>(j) * pr.hkv * pr.dv]);
          }
          // The appended rows are k_new / v_new.
          for (int j = 0; j < sq; ++j)
            for (int e = 0; e < pr.hkv * pr.d; ++e)
              EXPECT_EQ(keys[(static_cast<int64_t>(c.seqlens[b]) + j) * pr.hkv * pr.d + e],
                        c.kn[(static_cast<int64_t>(b) * sq + j) * pr.hkv * pr.d + e]);
          std::vector<double> want(pr.dv);
          for (int t = 0; t < sq; ++t)
            for (int h = 0; h < pr.hq; ++h) {
              double want_lse = 0;
              brute_row(&c.q[((static_cast<int64_t>(b) * sq + t) * pr.hq + h) * pr.d], keys.data(), vals.data(),
                        visible(causal, t, sq, len), pr.hkv, h / (pr.hq / pr.hkv), pr.d, pr.dv, scale, want.data(),
                        &want_lse);
              for (int e = 0; e < pr.dv; ++e)
                EXPECT_NEAR(out[((static_cast<int64_t>(b) * sq + t) * pr.hq + h) * pr.dv + e], want[e], 1e-12);
              EXPECT_NEAR(lse[(static_cast<int64_t>(b) * pr.hq + h) * sq + t], want_lse, 1e-12);
            }
        }
      }
}

TEST(ReferenceInference, PagedCacheEqualsContiguous) {
  for (int page : {16, 64, 256})
    for (bool causal : {false, true}) {
      CacheSetup flat = make_cache({3, 0, 130, 64}, 2, 2, 0, causal, 11);
      CacheSetup paged = make_cache({3, 0, 130, 64}, 2, 2, page, causal, 11);
      const size_t n_out = static_cast<size_t>(flat.pr.b) * 2 * flat.pr.hq * flat.pr.dv;
      std::vector<double> o1(n_out), o2(n_out), l1(static_cast<size_t>(flat.pr.b) * flat.pr.hq * 2), l2(l1.size());
      ref::attention_kvcache_fp64(flat.pr, flat.seqlens.data(), nullptr, flat.kc.data(), flat.vc.data(),
                                  flat.kn.data(), flat.vn.data(), flat.q.data(), o1.data(), l1.data());
      ref::attention_kvcache_fp64(paged.pr, paged.seqlens.data(), paged.table.data(), paged.kc.data(),
                                  paged.vc.data(), paged.kn.data(), paged.vn.data(), paged.q.data(), o2.data(),
                                  l2.data());
      EXPECT_EQ(o1, o2) << "page " << page;  // same keys in the same order: bitwise
      EXPECT_EQ(l1, l2) << "page " << page;
    }
}

// The input-precision forms (the rule's yardstick): close to fp64, and really rounded.
TEST(ReferenceInference, LowPrecisionFormsRoundButStayClose) {
  const std::vector<int32_t> lq = {7, 0, 1, 30}, lk = {9, 4, 1, 30};
  std::vector<int32_t> cu_q(5, 0), cu_k(5, 0);
  std::partial_sum(lq.begin(), lq.end(), cu_q.begin() + 1);
  std::partial_sum(lk.begin(), lk.end(), cu_k.begin() + 1);
  ref::VarlenProblem pr;
  pr.b = 4;
  pr.hq = 4;
  pr.hkv = 2;
  pr.d = 16;
  pr.dv = 8;
  pr.causal = true;
  const auto q = random_vec(static_cast<size_t>(cu_q[4]) * pr.hq * pr.d, 3);
  const auto k = random_vec(static_cast<size_t>(cu_k[4]) * pr.hkv * pr.d, 4);
  const auto v = random_vec(static_cast<size_t>(cu_k[4]) * pr.hkv * pr.dv, 5);
  std::vector<double> exact(static_cast<size_t>(cu_q[4]) * pr.hq * pr.dv), low(exact.size());
  ref::attention_varlen_fp64(pr, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(), exact.data(), nullptr);
  ref::attention_varlen_lowp(pr, DType::kBFloat16, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(), low.data());
  double err = 0;
  for (size_t i = 0; i < exact.size(); ++i) err = std::max(err, std::fabs(exact[i] - low[i]));
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 2e-2);

  for (int page : {0, 16}) {
    CacheSetup a = make_cache({0, 5, 37}, 1, 1, page, true, 21), b = make_cache({0, 5, 37}, 1, 1, page, true, 21);
    std::vector<double> o64(static_cast<size_t>(a.pr.b) * a.pr.hq * a.pr.dv), olow(o64.size());
    ref::attention_kvcache_fp64(a.pr, a.seqlens.data(), page ? a.table.data() : nullptr, a.kc.data(), a.vc.data(),
                                a.kn.data(), a.vn.data(), a.q.data(), o64.data(), nullptr);
    ref::attention_kvcache_lowp(b.pr, DType::kFloat16, b.seqlens.data(), page ? b.table.data() : nullptr,
                                b.kc.data(), b.vc.data(), b.kn.data(), b.vn.data(), b.q.data(), olow.data());
    double e = 0;
    for (size_t i = 0; i < o64.size(); ++i) e = std::max(e, std::fabs(o64[i] - olow[i]));
    EXPECT_GT(e, 0.0) << "page " << page;
    EXPECT_LT(e, 5e-3) << "page " << page;
    for (double x : olow) EXPECT_FALSE(std::isnan(x));
  }
}
