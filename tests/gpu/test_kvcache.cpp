// KV-cache attention (detail::kvcache_forward: append + split-KV attention + combine), called
// directly with a KvCacheParams, against the CPU references ref::attention_kvcache_fp64 / _lowp
// under the correctness rule (max|out - ref| <= 2 max|lowp - ref| + atol; lse within the rule's
// lse atol, -inf exactly where a row sees no key). Every buffer is hostile:
//  - the caches are NaN everywhere except the keys a sequence already holds (so a slot at or past
//    cache_seqlens + s_new that reaches the result, or a new slot the append missed, fails), and
//    block-table entries past a sequence's pages are out of range (never to be looked up);
//  - q, the caches, k_new / v_new and out are views inside (.., dim + 8) allocations whose 8
//    extra columns per head are NaN (a column past d or d_v taken into a product fails; one
//    written in out fails the gap check);
//  - out and lse are poisoned before every launch (and lse has a poisoned guard after it).
// After the call the whole cache buffer must equal the one before with exactly the new keys
// written. Each case runs with 1 split, several, and the heuristic (the append runs each time,
// and rewrites the same slots with the same values).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/params.h"
#include "decode/kvcache.h"
#include "decode/split_heuristic.h"
#include "gpu_util.h"
#include "reference/cpu_reference.h"
#include "reference/cpu_reference_inference.h"

namespace flashattn::testing {
namespace {

constexpr int kGap = 8;  // NaN columns after each head's row (16 B: strides stay valid)

struct KvCase {
  std::string name;
  int b, sq, hq, hkv, d, dv;
  bool causal;
  DType dt;
  int s_new;
  int page_size;  // 0: contiguous
  int capacity;   // keys per sequence the cache holds (paged: max_pages * page_size)
  std::vector<int> seqlens;  // cache_seqlens before the append (b entries)
  bool null_seqlens = false;  // pass cache_seqlens = null, cache_seqlen = seqlens[0] (all equal)
  // Issue 17's modifiers: window (-1 unbounded), softcap (0 off), ALiBi (0 off, 1 (Hq,), 2 (B, Hq)).
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  int alibi = 0;
};

void PrintTo(const KvCase& c, std::ostream* os) { *os << c.name; }

std::vector<KvCase> cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  return {
      // decode, contiguous, GQA 8, an empty sequence, one full to capacity
      {"contig_d128_gqa8_sq1_new1", 3, 1, 32, 4, 128, 128, false, bf, 1, 0, 300, {0, 17, 299}},
      {"contig_d128_gqa8_sq4_new4_causal", 3, 4, 32, 4, 128, 128, true, fp, 4, 0, 300, {0, 113, 296}},
      // no cached keys and no new ones for sequence 1: out 0, lse -inf
      {"contig_d64_sq1_new0_empty", 2, 1, 8, 2, 64, 64, false, fp, 0, 0, 200, {0, 150}},
      // Sq > visible keys, causal: rows without keys
      {"contig_d64_sq4_causal_fewkeys", 2, 4, 4, 4, 64, 64, true, bf, 0, 0, 64, {1, 2}},
      {"contig_d192_v128_causal", 2, 3, 8, 2, 192, 128, true, bf, 2, 0, 400, {333, 5}},
      {"contig_d80_odd", 2, 1, 6, 2, 80, 80, false, fp, 1, 0, 128, {100, 1}},
      {"contig_nullseqlens_d128", 2, 2, 16, 2, 128, 128, true, bf, 1, 0, 256, {77, 77}, true},
      // MQA with 32 packed rows (two M tiles) and hq == hkv
      {"contig_mqa_sq4_two_mtiles", 2, 4, 8, 1, 128, 128, true, fp, 4, 0, 512, {200, 37}},
      {"contig_mha_d256", 2, 1, 4, 4, 256, 256, false, bf, 1, 0, 300, {250, 64}},
      // paged
      {"paged16_d64_gqa8", 3, 1, 32, 4, 64, 64, false, fp, 1, 16, 320, {0, 15, 301}},
      {"paged64_d128_gqa8_causal_sq4", 3, 4, 32, 4, 128, 128, true, bf, 4, 64, 512, {60, 0, 400}},
      {"paged256_d256_new0", 4, 1, 8, 2, 256, 256, false, bf, 0, 256, 1024, {1000, 1, 0, 513}},
      {"paged48_d80_causal", 2, 4, 8, 2, 80, 80, true, fp, 2, 48, 480, {100, 47}},
      {"paged64_d192_v128", 2, 1, 16, 2, 192, 128, false, fp, 1, 64, 320, {130, 250}},
      // long enough that the heuristic splits (b * hkv * m_tiles CTAs are few)
      {"paged64_long_d128", 2, 1, 32, 8, 128, 128, false, bf, 1, 64, 4160, {4096, 1000}},
      {"contig_long_d64_causal_sq2", 1, 2, 4, 1, 64, 64, true, fp, 2, 0, 5000, {4095}},
      // sliding window (decode and Sq 4, causal and not), softcap, ALiBi, all together
      {"window_d128_gqa8_sq1", 3, 1, 32, 4, 128, 128, false, bf, 1, 0, 600, {0, 300, 590}, false, 100, 0},
      {"window_paged64_causal_sq4", 3, 4, 32, 4, 128, 128, true, fp, 2, 64, 640, {70, 3, 500}, false, 64, -1},
      {"window_both_sides_d64", 2, 4, 8, 2, 64, 64, false, bf, 0, 0, 300, {200, 40}, false, 31, 2},
      {"softcap30_d128", 2, 2, 16, 2, 128, 128, true, bf, 1, 0, 400, {250, 9}, false, -1, -1, 30.f},
      {"alibi_heads_paged16", 2, 1, 16, 4, 64, 64, false, fp, 1, 16, 320, {100, 300}, false, -1, -1, 0.f, 1},
      {"alibi_batch_window_cap_d256", 2, 3, 8, 2, 256, 256, true, bf, 1, 0, 700, {600, 130}, false, 257, 0, 50.f, 2},
  };
}

std::vector<uint16_t> download16(const void* ptr, size_t n) {
  std::vector<uint16_t> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), ptr, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Dense (rows, heads, dim) doubles from a gapped (rows, heads, dim + kGap) 16-bit image.
std::vector<double> dense(const std::vector<uint16_t>& raw, int64_t rows, int heads, int dim, DType dt) {
  std::vector<double> out(size_t(rows) * heads * dim);
  for (int64_t r = 0; r < rows * heads; ++r)
    for (int e = 0; e < dim; ++e) out[size_t(r) * dim + e] = half_bits_to_double(raw[size_t(r) * (dim + kGap) + e], dt);
  return out;
}

// Random values in a gapped buffer's columns, NaN in its gaps.
void fill_gapped(void* ptr, DType dt, int64_t rows, int dim, uint64_t seed, float mean) {
  check::fill_random(ptr, dt, rows * (dim + kGap), seed, mean, 1.f, nullptr);
  EXPECT_EQ(cudaMemset2D(static_cast<char*>(ptr) + size_t(dim) * 2, size_t(dim + kGap) * 2, 0xFF, kGap * 2, size_t(rows)),
            cudaSuccess);
}

class KvCache : public ::testing::TestWithParam<KvCase> {};

TEST_P(KvCache, MatchesReferenceAndWritesOnlyNewKeys) {
  FLASHATTN_REQUIRE_GPU();
  const KvCase c = GetParam();
  ASSERT_EQ(int(c.seqlens.size()), c.b);
  const bool paged = c.page_size > 0;
  const int max_pages = paged ? c.capacity / c.page_size : 0;
  const int num_pages = paged ? c.b * max_pages + 3 : 0;  // 3 pages no sequence uses
  const int64_t cache_rows = paged ? int64_t(num_pages) * c.page_size : int64_t(c.b) * c.capacity;
  const int64_t kw = c.d + kGap, vw = c.dv + kGap;  // gapped row widths
  const int64_t n_kc = cache_rows * c.hkv * kw, n_vc = cache_rows * c.hkv * vw;
  const int64_t rows_q = int64_t(c.b) * c.sq * c.hq, rows_new = int64_t(c.b) * c.s_new * c.hkv;
  const int64_t n_lse = int64_t(c.b) * c.hq * c.sq, lse_guard = 64;

  // Block table: a shuffled pool; entries past a sequence's needed pages are out of range.
  std::vector<int32_t> table(size_t(c.b) * std::max(max_pages, 1), 0);
  if (paged) {
    std::vector<int32_t> pool(num_pages);
    for (int i = 0; i < num_pages; ++i) pool[i] = i;
    std::shuffle(pool.begin(), pool.end(), std::mt19937(1234 + c.b));
    for (int b = 0; b < c.b; ++b) {
      const int need = (c.seqlens[b] + c.s_new + c.page_size - 1) / c.page_size;
      for (int i = 0; i < max_pages; ++i)
        table[size_t(b) * max_pages + i] = i < need ? pool[size_t(b) * max_pages + i] : (i % 2 ? -7 : num_pages + 1000);
    }
  }
  auto cache_row = [&](int b, int64_t j) -> int64_t {
    if (!paged) return int64_t(b) * c.capacity + j;
    return int64_t(table[size_t(b) * max_pages + j / c.page_size]) * c.page_size + j % c.page_size;
  };

  DeviceBuffer q(size_t(rows_q) * kw * 2), kc(size_t(n_kc) * 2), vc(size_t(n_vc) * 2),
      kn(size_t(std::max<int64_t>(rows_new, 1)) * kw * 2), vn(size_t(std::max<int64_t>(rows_new, 1)) * vw * 2),
      o(size_t(rows_q) * vw * 2), lse(size_t(n_lse + lse_guard) * 4), seqlens(size_t(c.b) * 4),
      bt(table.size() * 4), slopes(size_t(c.b) * c.hq * 4);
  std::vector<float> hslopes(size_t(c.b) * c.hq);
  for (size_t i = 0; i < hslopes.size(); ++i) hslopes[i] = 0.3f / float(1 + i % 5) + 0.02f * float(i / c.hq);
  ASSERT_EQ(cudaMemcpy(slopes.ptr, hslopes.data(), hslopes.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // Caches: NaN, then random values in the keys each sequence holds (gaps NaN again).
  ASSERT_EQ(cudaMemset(kc.ptr, 0xFF, kc.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(vc.ptr, 0xFF, vc.bytes), cudaSuccess);
  for (int b = 0; b < c.b; ++b) {
    for (int64_t j0 = 0; j0 < c.seqlens[b];) {  // runs of keys contiguous in memory
      int64_t n = c.seqlens[b] - j0;
      if (paged) n = std::min<int64_t>(n, c.page_size - j0 % c.page_size);
      const int64_t row = cache_row(b, j0);
      check::fill_random(static_cast<char*>(kc.ptr) + row * c.hkv * kw * 2, c.dt, n * c.hkv * kw, 100 + b * 7 + j0, 0.2f,
                         1.f, nullptr);
      check::fill_random(static_cast<char*>(vc.ptr) + row * c.hkv * vw * 2, c.dt, n * c.hkv * vw, 200 + b * 7 + j0,
                         -0.3f, 1.f, nullptr);
      j0 += n;
    }
  }
  ASSERT_EQ(cudaMemset2D(static_cast<char*>(kc.ptr) + c.d * 2, kw * 2, 0xFF, kGap * 2, cache_rows * c.hkv), cudaSuccess);
  ASSERT_EQ(cudaMemset2D(static_cast<char*>(vc.ptr) + c.dv * 2, vw * 2, 0xFF, kGap * 2, cache_rows * c.hkv), cudaSuccess);
  fill_gapped(q.ptr, c.dt, rows_q, c.d, 11 + c.d, 0.3f);
  if (rows_new > 0) {
    fill_gapped(kn.ptr, c.dt, rows_new, c.d, 12, 0.2f);
    fill_gapped(vn.ptr, c.dt, rows_new, c.dv, 13, -0.3f);
  }
  ASSERT_EQ(cudaMemcpy(seqlens.ptr, c.seqlens.data(), size_t(c.b) * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(bt.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);

  // Host images before the call; the expected cache after it (bit for bit).
  const auto kc0 = download16(kc.ptr, n_kc), vc0 = download16(vc.ptr, n_vc);
  const auto q_raw = download16(q.ptr, rows_q * kw);
  const auto kn_raw = rows_new > 0 ? download16(kn.ptr, rows_new * kw) : std::vector<uint16_t>();
  const auto vn_raw = rows_new > 0 ? download16(vn.ptr, rows_new * vw) : std::vector<uint16_t>();
  auto kc_want = kc0, vc_want = vc0;
  for (int b = 0; b < c.b; ++b)
    for (int t = 0; t < c.s_new; ++t)
      for (int h = 0; h < c.hkv; ++h) {
        const int64_t dst = cache_row(b, c.seqlens[b] + t) * c.hkv + h, src = (int64_t(b) * c.s_new + t) * c.hkv + h;
        std::copy_n(kn_raw.begin() + src * kw, c.d, kc_want.begin() + dst * kw);
        std::copy_n(vn_raw.begin() + src * vw, c.dv, vc_want.begin() + dst * vw);
      }

  // References (they append into their own copies of the cache).
  ref::KvCacheProblem pr;
  pr.b = c.b; pr.sq = c.sq; pr.hq = c.hq; pr.hkv = c.hkv; pr.d = c.d; pr.dv = c.dv; pr.causal = c.causal;
  pr.s_new = c.s_new; pr.s_cache = paged ? 0 : c.capacity; pr.page_size = c.page_size; pr.max_pages = max_pages;
  // Causal with a window: the API stores right = 0 (the intersection).
  const int wr = c.causal && (c.window_left >= 0 || c.window_right >= 0) ? 0 : c.window_right;
  pr.window_left = c.window_left;
  pr.window_right = wr;
  pr.softcap = c.softcap;
  if (c.alibi) {
    pr.alibi_slopes.assign(hslopes.begin(), hslopes.begin() + (c.alibi == 2 ? c.b * c.hq : c.hq));
    pr.alibi_batch_stride = c.alibi == 2 ? c.hq : 0;
  }
  const auto qd = dense(q_raw, rows_q, 1, c.d, c.dt);
  const auto knd = dense(kn_raw, rows_new, 1, c.d, c.dt), vnd = dense(vn_raw, rows_new, 1, c.dv, c.dt);
  std::vector<double> ref_o(size_t(rows_q) * c.dv), low_o(ref_o.size()), ref_l(static_cast<size_t>(n_lse));
  {
    auto kd = dense(kc0, cache_rows * c.hkv, 1, c.d, c.dt), vd = dense(vc0, cache_rows * c.hkv, 1, c.dv, c.dt);
    auto kd2 = kd, vd2 = vd;
    ref::attention_kvcache_fp64(pr, c.seqlens.data(), paged ? table.data() : nullptr, kd.data(), vd.data(), knd.data(),
                                vnd.data(), qd.data(), ref_o.data(), ref_l.data());
    ref::attention_kvcache_lowp(pr, c.dt, c.seqlens.data(), paged ? table.data() : nullptr, kd2.data(), vd2.data(),
                                knd.data(), vnd.data(), qd.data(), low_o.data());
  }

  detail::KvCacheParams p;
  p.q = {q.ptr, c.sq * c.hq * kw, c.hq * kw, kw};
  const int64_t rows_per_b = paged ? c.page_size : c.capacity;  // sb: sequence (contiguous) or page stride
  p.k = {kc.ptr, rows_per_b * c.hkv * kw, c.hkv * kw, kw};
  p.v = {vc.ptr, rows_per_b * c.hkv * vw, c.hkv * vw, vw};
  p.k_cache = {kc.ptr, p.k.sb, p.k.ss, p.k.sh};
  p.v_cache = {vc.ptr, p.v.sb, p.v.ss, p.v.sh};
  p.b = c.b; p.sq = c.sq; p.sk = c.capacity; p.hq = c.hq; p.hkv = c.hkv; p.d = c.d; p.d_v = c.dv;
  p.h_ratio = c.hq / c.hkv;
  p.scale = float(1.0 / std::sqrt(double(c.d)));
  p.scale_log2 = float(1.0 / std::sqrt(double(c.d)) * 1.4426950408889634);
  p.causal = c.causal;
  p.dtype = c.dt == DType::kBFloat16 ? detail::ElemType::kBFloat16 : detail::ElemType::kFloat16;
  if (rows_new > 0) {
    p.k_new = {kn.ptr, c.s_new * c.hkv * kw, c.hkv * kw, kw};
    p.v_new = {vn.ptr, c.s_new * c.hkv * vw, c.hkv * vw, vw};
  }
  p.s_new = c.s_new;
  p.cache_seqlens = c.null_seqlens ? nullptr : static_cast<const int*>(seqlens.ptr);
  p.cache_seqlen = c.seqlens[0];
  if (paged) {
    p.block_table = static_cast<const int*>(bt.ptr);
    p.block_table_stride = max_pages;
    p.page_size = c.page_size;
    p.max_pages = max_pages;
    p.num_pages = num_pages;
  }
  p.o = {o.ptr, c.sq * c.hq * vw, c.hq * vw, vw};
  p.lse = static_cast<float*>(lse.ptr);
  p.window_left = c.window_left;
  p.window_right = wr;
  p.softcap = c.softcap;
  if (c.alibi) {
    p.alibi_slopes = static_cast<const float*>(slopes.ptr);
    p.alibi_batch_stride = c.alibi == 2 ? c.hq : 0;
  }

  for (int splits : {1, 3, 0}) {
    SCOPED_TRACE("num_splits " + std::to_string(splits));
    check::poison(o.ptr, c.dt, rows_q * vw, nullptr);
    check::poison(lse.ptr, DType::kFloat32, n_lse + lse_guard, nullptr);
    p.num_splits = splits;
    const Status st = detail::kvcache_forward(p, nullptr);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    EXPECT_TRUE(download16(kc.ptr, n_kc) == kc_want) << "k cache: not exactly the old one plus the new keys";
    EXPECT_TRUE(download16(vc.ptr, n_vc) == vc_want) << "v cache: not exactly the old one plus the new values";

    const auto o_raw = download16(o.ptr, rows_q * vw);
    int64_t gap_written = 0;
    for (int64_t r = 0; r < rows_q; ++r)
      for (int e = c.dv; e < vw; ++e) gap_written += o_raw[size_t(r * vw + e)] != 0xFFFF;
    EXPECT_EQ(gap_written, 0) << "out written at or past d_v";
    const auto out = dense(o_raw, rows_q, 1, c.dv, c.dt);
    const ref::RuleResult rule = ref::check_rule(out, ref_o, low_o, check::default_atol(c.dt));
    EXPECT_TRUE(rule.pass) << "out err " << rule.err << " > bound " << rule.bound << " (lowp err " << rule.lowp_err << ")";

    std::vector<float> gl(size_t(n_lse + lse_guard));
    ASSERT_EQ(cudaMemcpy(gl.data(), lse.ptr, gl.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    double lse_err = 0;
    int64_t inf_wrong = 0;
    for (int64_t i = 0; i < n_lse; ++i) {
      if (std::isinf(ref_l[i])) {
        inf_wrong += !(std::isinf(gl[i]) && gl[i] < 0);
        continue;
      }
      lse_err = std::isnan(gl[i]) ? INFINITY : std::max(lse_err, std::fabs(double(gl[i]) - ref_l[i]));
    }
    EXPECT_EQ(inf_wrong, 0) << "rows without keys must have lse -inf";
    // Softcap: tanh.approx (relative error <= 2^-11) moves a score by up to softcap * 2^-11.
    EXPECT_LE(lse_err, 1e-3 + 2.0 * c.softcap / 2048.0) << "lse";
    int64_t guard_written = 0;
    for (int64_t i = n_lse; i < n_lse + lse_guard; ++i) guard_written += !std::isnan(gl[i]);
    EXPECT_EQ(guard_written, 0) << "written past lse";
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, KvCache, ::testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

// Bad metadata: cache_seqlens below 0 and past the capacity, block-table entries outside the
// pool inside the visible range. The call must not fault or write outside its buffers (guard
// regions on both sides of the caches keep their bytes), and out must stay finite.
TEST(KvCacheRobustness, BadMetadataStaysInBounds) {
  FLASHATTN_REQUIRE_GPU();
  const int b = 3, hq = 8, hkv = 2, d = 128, ps = 16, max_pages = 4, num_pages = 10, s_new = 3;
  const DType dt = DType::kBFloat16;
  const int64_t row_elems = int64_t(hkv) * d, page_elems = ps * row_elems, guard = page_elems;
  const int64_t cache_elems = int64_t(num_pages) * page_elems;
  DeviceBuffer kc((cache_elems + 2 * guard) * 2), vc((cache_elems + 2 * guard) * 2), q(size_t(b) * hq * d * 2),
      kn(size_t(b) * s_new * row_elems * 2), vn(size_t(b) * s_new * row_elems * 2), o(size_t(b) * hq * d * 2),
      lse(size_t(b) * hq * 4), seqlens(size_t(b) * 4), bt(size_t(b) * max_pages * 4);
  check::fill_random(kc.ptr, dt, cache_elems + 2 * guard, 1, 0.1f, 1.f, nullptr);
  check::fill_random(vc.ptr, dt, cache_elems + 2 * guard, 2, 0.1f, 1.f, nullptr);
  check::fill_random(q.ptr, dt, int64_t(b) * hq * d, 3, 0.1f, 1.f, nullptr);
  check::fill_random(kn.ptr, dt, int64_t(b) * s_new * row_elems, 4, 0.1f, 1.f, nullptr);
  check::fill_random(vn.ptr, dt, int64_t(b) * s_new * row_elems, 5, 0.1f, 1.f, nullptr);
  const std::vector<int32_t> lens = {-5, 1000, 40};
  const std::vector<int32_t> table = {0, 1, 2, 3, -1, 99, 4, 5, 6, 7, num_pages, 8};
  ASSERT_EQ(cudaMemcpy(seqlens.ptr, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(bt.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const auto k_before = download16(kc.ptr, cache_elems + 2 * guard), v_before = download16(vc.ptr, cache_elems + 2 * guard);

  detail::KvCacheParams p;
  void* k0 = static_cast<char*>(kc.ptr) + guard * 2;
  void* v0 = static_cast<char*>(vc.ptr) + guard * 2;
  p.q = {q.ptr, int64_t(hq) * d, int64_t(hq) * d, d};
  p.k = {k0, page_elems, row_elems, d};
  p.v = {v0, page_elems, row_elems, d};
  p.k_cache = {k0, page_elems, row_elems, d};
  p.v_cache = {v0, page_elems, row_elems, d};
  p.b = b; p.sq = 1; p.sk = max_pages * ps; p.hq = hq; p.hkv = hkv; p.d = d; p.d_v = d; p.h_ratio = hq / hkv;
  p.scale = 1.f / std::sqrt(float(d));
  p.scale_log2 = p.scale * 1.4426950408889634f;
  p.dtype = detail::ElemType::kBFloat16;
  p.k_new = {kn.ptr, int64_t(s_new) * row_elems, row_elems, d};
  p.v_new = {vn.ptr, int64_t(s_new) * row_elems, row_elems, d};
  p.s_new = s_new;
  p.cache_seqlens = static_cast<const int*>(seqlens.ptr);
  p.block_table = static_cast<const int*>(bt.ptr);
  p.block_table_stride = max_pages;
  p.page_size = ps;
  p.max_pages = max_pages;
  p.num_pages = num_pages;
  p.o = {o.ptr, int64_t(hq) * d, int64_t(hq) * d, d};
  p.lse = static_cast<float*>(lse.ptr);
  for (int splits : {1, 4, 0}) {
    p.num_splits = splits;
    check::poison(o.ptr, dt, int64_t(b) * hq * d, nullptr);
    ASSERT_TRUE(detail::kvcache_forward(p, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto k_after = download16(kc.ptr, cache_elems + 2 * guard), v_after = download16(vc.ptr, cache_elems + 2 * guard);
    for (int64_t i = 0; i < guard; ++i) {
      ASSERT_EQ(k_after[i], k_before[i]);
      ASSERT_EQ(v_after[i], v_before[i]);
      ASSERT_EQ(k_after[cache_elems + guard + i], k_before[cache_elems + guard + i]);
      ASSERT_EQ(v_after[cache_elems + guard + i], v_before[cache_elems + guard + i]);
    }
    // Page 9 is in no table row: untouched. Sequence 1 is full (1000 clamps to 64): its append is dropped.
    for (int64_t i = 0; i < page_elems; ++i) ASSERT_EQ(k_after[guard + 9 * page_elems + i], k_before[guard + 9 * page_elems + i]);
    const auto out = to_host(make_contiguous(o.ptr, dt, b, 1, hq, d));
    for (double x : out) ASSERT_TRUE(std::isfinite(x));
  }
}

// The split heuristic, no GPU needed: one split once the CTAs fill the device's slots, more when
// a few long sequences would leave most SMs idle, never more than the key blocks allow.
TEST(KvCacheSplits, Heuristic) {
  using decode::choose_num_splits;
  EXPECT_EQ(choose_num_splits(512, 264, 128), 1);  // B=64, Hkv=8, 8k keys on an H200 at 2 CTAs/SM
  EXPECT_GE(choose_num_splits(8, 264, 128), 16);   // B=1, Hkv=8
  EXPECT_LE(choose_num_splits(8, 264, 128), decode::kMaxSplits);
  EXPECT_EQ(choose_num_splits(8, 264, 1), 1);       // one key block: nothing to split
  EXPECT_LE(choose_num_splits(8, 264, 10), 10 / decode::kMinBlocksPerSplit);
  EXPECT_GT(choose_num_splits(300, 264, 128), 1);   // 1.14 waves: the second would be nearly empty
  for (int64_t ctas : {1, 7, 64, 200, 1000, 5000})
    for (int64_t blocks : {1, 3, 64, 1000}) {
      const int s = choose_num_splits(ctas, 132, blocks);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, std::max<int64_t>(1, std::min<int64_t>(decode::kMaxSplits, blocks / decode::kMinBlocksPerSplit)));
    }
}

}  // namespace
}  // namespace flashattn::testing
