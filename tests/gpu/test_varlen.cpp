// Packed variable-length batches (ForwardArgs' cu_seqlens fields) through the public forward,
// on each family and on auto dispatch, under the correctness rule against the GPU references
// (their varlen form is itself checked against the CPU fp64 reference below). Every case:
//  - sequences of unequal lengths, including 0 and 1, q and k lengths that differ (causal is
//    bottom-right per sequence), GQA, head dims across the kernels (odd ones and Dv != D);
//  - out and lse poisoned with NaN before the call, so an unwritten row fails the rule;
//  - k and v allocated with rows past cu_seqlens_k[num_seqs] holding NaN, so a kernel that lets
//    a row outside the sequences reach a result (even as P = 0 times V) fails;
//  - the rows of out past the last sequence must keep their poison (nothing written there).
// Features/Varlen runs the same test with a sliding window, softcap and ALiBi ((Hq,) and
// (num_seqs, Hq) slopes): the sm90 feature kernel's varlen twin, or auto. Sm80Features/Varlen
// runs it with the sm80 backend forced (its varlen feature kernels, src/sm80/fwd/config.h), at
// every kernel head dim and an odd one, on the mixed and the skewed lengths.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "api/backends.h"
#include "common/device_info.h"
#include "common/params.h"
#include "gpu_util.h"
#include "reference/cpu_reference_inference.h"

namespace flashattn::testing {
namespace {

constexpr int kKvTail = 37;  // NaN rows of k and v past the last sequence
constexpr int kOutTail = 5;  // rows of out past the last sequence (must stay untouched)

struct VarlenCase {
  const char* lengths;  // name of the length set
  std::vector<int> lq, lk;
  int hq, hkv, d, dv;
  bool causal;
  DType dt;
  Backend backend;
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  int alibi = 0;  // 0: none, 1: (Hq,) slopes, 2: (num_seqs, Hq)
};

std::string name(const VarlenCase& c) {
  std::string s = std::string(backend_name(c.backend)) + "_" + c.lengths + "_d" + std::to_string(c.d) + "v" +
                  std::to_string(c.dv) + (c.causal ? "_causal" : "_full") +
                  (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") + "_h" + std::to_string(c.hq) + "x" +
                  std::to_string(c.hkv);
  if (c.window_left != -1 || c.window_right != -1)
    s += "_w" + std::to_string(c.window_left + 1) + "_" + std::to_string(c.window_right + 1);  // plus one: no '-'
  if (c.softcap > 0.f) s += "_cap" + std::to_string(static_cast<int>(c.softcap));
  if (c.alibi) s += c.alibi == 1 ? "_alibi" : "_alibiseq";
  return s;
}
void PrintTo(const VarlenCase& c, std::ostream* os) { *os << name(c); }

std::vector<VarlenCase> cases() {
  struct Lengths {
    const char* name;
    std::vector<int> lq, lk;
  };
  std::vector<int> skew_q{1500}, skew_k{1700};  // one long sequence, many short ones
  for (int i = 1; i <= 24; ++i) {
    skew_q.push_back(i % 5 == 0 ? 0 : i * 7 % 61);
    skew_k.push_back(i * 13 % 97);
  }
  const Lengths sets[] = {
      {"mixed", {0, 1, 700, 257, 64, 5, 130, 0}, {3, 0, 700, 300, 64, 1, 129, 0}},
      {"equal", {384, 384, 384}, {384, 384, 384}},
      {"skewed", skew_q, skew_k},
  };
  std::vector<VarlenCase> cs;
  std::vector<std::pair<int, int>> dims{{64, 64}, {128, 128}, {256, 256}, {96, 96}, {192, 192}, {80, 80}, {192, 128}};
  for (Backend be : {Backend::kSm90, Backend::kSm80, Backend::kAuto}) {
    int i = 0;
    for (auto [d, dv] : dims) {
      for (bool causal : {false, true}) {
        const Lengths& l = sets[(i++) % 3];
        const DType dt = (i % 2) ? DType::kBFloat16 : DType::kFloat16;
        const bool gqa = i % 3 != 0;
        cs.push_back({l.name, l.lq, l.lk, gqa ? 16 : 3, gqa ? 2 : 3, d, dv, causal, dt, be});
      }
    }
  }
  return cs;
}

// A case's window, softcap and ALiBi (VarlenCase's fields of the same names).
struct Feature {
  int left, right;
  float softcap;
  int alibi;
};
VarlenCase with_feature(VarlenCase c, const Feature& f) {
  c.window_left = f.left;
  c.window_right = f.right;
  c.softcap = f.softcap;
  c.alibi = f.alibi;
  return c;
}

// Windows, softcap and ALiBi on the mixed lengths (0- and 1-long sequences, Sq != Sk per
// sequence) at each sm90 feature kernel's head dim.
std::vector<VarlenCase> feature_cases() {
  const std::vector<int> lq{0, 1, 700, 257, 64, 5, 130, 0}, lk{3, 0, 700, 300, 64, 1, 129, 0};
  const Feature fs[] = {{0, 0, 0.f, 0},   {1, 0, 0.f, 2},     {127, 0, 30.f, 0}, {256, 256, 0.f, 1},
                        {1000, 3, 50.f, 2}, {-1, -1, 30.f, 0}, {-1, -1, 0.f, 1}};
  std::vector<VarlenCase> cs;
  int i = 0;
  for (Backend be : {Backend::kSm90, Backend::kAuto}) {
    for (auto [d, dv] : std::vector<std::pair<int, int>>{{64, 64}, {128, 128}, {96, 96}, {256, 256}, {192, 192}}) {
      for (const Feature& f : fs) {
        const bool causal = i % 2 == 1, gqa = i % 3 != 0;
        const DType dt = (i / 2) % 2 ? DType::kBFloat16 : DType::kFloat16;
        ++i;
        if ((d == 96 || d == 192) && i % 2 == 0) continue;  // fewer cases at the odd head dims
        cs.push_back(with_feature({"mixed", lq, lk, gqa ? 8 : 3, gqa ? 2 : 3, d, dv, causal, dt, be}, f));
      }
    }
  }
  return cs;
}

// The sm80 family's varlen feature kernels (forced, so they also run on Hopper): every window
// shape of the grid above and a few more with causal and without, softcap 30 and 50, both ALiBi
// slope shapes, GQA and MHA, both dtypes, on the mixed lengths (0- and 1-long sequences, Sq != Sk
// both ways) and the skewed batch (one 1500 x 1700 sequence among 24 short ones, some empty).
std::vector<VarlenCase> sm80_feature_cases() {
  const std::vector<int> lq{0, 1, 700, 257, 64, 5, 130, 0}, lk{3, 0, 700, 300, 64, 1, 129, 0};
  std::vector<int> skew_q{1500}, skew_k{1700};
  for (int i = 1; i <= 24; ++i) {
    skew_q.push_back(i % 5 == 0 ? 0 : i * 7 % 61);
    skew_k.push_back(i * 13 % 97);
  }
  const Feature fs[] = {{0, 0, 0.f, 0},     {1, 0, 0.f, 2},    {127, 0, 30.f, 0}, {256, 256, 0.f, 1},
                        {1000, 3, 50.f, 2}, {-1, -1, 30.f, 0}, {-1, -1, 0.f, 1},  {-1, -1, 50.f, 2},
                        {127, 0, 0.f, 1},   {1000, 3, 0.f, 0}};
  std::vector<VarlenCase> cs;
  int i = 0;
  for (auto [d, dv] : std::vector<std::pair<int, int>>{{64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}}) {
    for (const Feature& f : fs) {
      const bool causal = i % 2 == 1, gqa = i % 3 != 0, skewed = (i / 3) % 2 == 1;
      const DType dt = (i / 2) % 2 ? DType::kBFloat16 : DType::kFloat16;
      ++i;
      cs.push_back(with_feature({skewed ? "skewed" : "mixed", skewed ? skew_q : lq, skewed ? skew_k : lk, gqa ? 8 : 3,
                                 gqa ? 2 : 3, d, dv, causal, dt, Backend::kSm80},
                                f));
    }
  }
  return cs;
}

std::vector<int> offsets(const std::vector<int>& len) {
  std::vector<int> cu(len.size() + 1, 0);
  std::partial_sum(len.begin(), len.end(), cu.begin() + 1);
  return cu;
}

class Varlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(Varlen, MatchesReferenceAndTouchesOnlyItsRows) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenCase c = GetParam();
  const std::vector<int> cu_q = offsets(c.lq), cu_k = offsets(c.lk);
  const int b = static_cast<int>(c.lq.size());
  const int total_q = cu_q.back(), total_k = cu_k.back() + kKvTail;
  const int rows_out = total_q + kOutTail;
  const int max_q = *std::max_element(c.lq.begin(), c.lq.end());
  const int max_k = *std::max_element(c.lk.begin(), c.lk.end());
  DeviceBuffer q(size_t(total_q) * c.hq * c.d * 2), k(size_t(total_k) * c.hkv * c.d * 2),
      v(size_t(total_k) * c.hkv * c.dv * 2), o(size_t(rows_out) * c.hq * c.dv * 2),
      lse(size_t(c.hq) * total_q * 4), dcu_q(cu_q.size() * 4), dcu_k(cu_k.size() * 4);
  check::fill_random(q.ptr, c.dt, int64_t(total_q) * c.hq * c.d, 21 + c.d, 0.3f, 1.f, nullptr);
  check::fill_random(k.ptr, c.dt, int64_t(total_k) * c.hkv * c.d, 22 + c.d, 0.2f, 1.f, nullptr);
  check::fill_random(v.ptr, c.dt, int64_t(total_k) * c.hkv * c.dv, 23 + c.dv, -0.4f, 1.f, nullptr);
  const size_t k_row = size_t(c.hkv) * c.d * 2, v_row = size_t(c.hkv) * c.dv * 2;
  ASSERT_EQ(cudaMemset(static_cast<char*>(k.ptr) + size_t(cu_k.back()) * k_row, 0xFF, kKvTail * k_row), cudaSuccess);
  ASSERT_EQ(cudaMemset(static_cast<char*>(v.ptr) + size_t(cu_k.back()) * v_row, 0xFF, kKvTail * v_row), cudaSuccess);
  check::poison(o.ptr, c.dt, int64_t(rows_out) * c.hq * c.dv, nullptr);
  check::poison(lse.ptr, DType::kFloat32, int64_t(c.hq) * total_q, nullptr);
  ASSERT_EQ(cudaMemcpy(dcu_q.ptr, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dcu_k.ptr, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // ALiBi slopes 2^(-8 h / Hq), scaled per sequence for (num_seqs, Hq) slopes.
  std::vector<float> slopes;
  for (int s = 0; s < (c.alibi == 2 ? b : 1); ++s)
    for (int h = 0; h < c.hq; ++h) slopes.push_back(std::pow(2.f, -8.f * (h + 1) / c.hq) * (0.5f + 0.25f * s));
  DeviceBuffer dslopes(slopes.size() * 4);
  ASSERT_EQ(cudaMemcpy(dslopes.ptr, slopes.data(), slopes.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);

  ForwardArgs a;
  a.q = make_contiguous(q.ptr, c.dt, 1, total_q, c.hq, c.d);
  a.k = make_contiguous(k.ptr, c.dt, 1, total_k, c.hkv, c.d);
  a.v = make_contiguous(v.ptr, c.dt, 1, total_k, c.hkv, c.dv);
  a.out = make_contiguous(o.ptr, c.dt, 1, total_q, c.hq, c.dv);  // the tail rows are outside the view
  a.lse = static_cast<float*>(lse.ptr);
  a.causal = c.causal;
  a.backend = c.backend;
  a.cu_seqlens_q = static_cast<const int32_t*>(dcu_q.ptr);
  a.cu_seqlens_k = static_cast<const int32_t*>(dcu_k.ptr);
  a.num_seqs = b;
  a.max_seqlen_q = max_q;
  a.max_seqlen_k = max_k;
  a.window_left = c.window_left;
  a.window_right = c.window_right;
  a.softcap = c.softcap;
  if (c.alibi) {
    a.alibi_slopes = static_cast<const float*>(dslopes.ptr);
    a.alibi_batch_stride = c.alibi == 2 ? c.hq : 0;
  }

  Backend chosen{};
  const Status rs = resolve_backend(a, &chosen);
  if (!rs.ok() && (rs.message().find("not built") != std::string::npos ||
                   rs.message().find("compute capability") != std::string::npos))
    GTEST_SKIP() << rs.message();
  ASSERT_TRUE(rs.ok()) << rs.message();
  if (c.backend == Backend::kAuto) {
    detail::DeviceInfo dev;
    ASSERT_TRUE(detail::current_device_info(&dev).ok());
    EXPECT_NE(chosen, Backend::kReference) << "auto dispatch fell back to the naive reference";
  }
  const Status st = forward(a, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const check::Report r = check::check_against_reference(a, nullptr);
  EXPECT_TRUE(r.pass) << r.message;
  EXPECT_TRUE(r.lse_checked);

  std::vector<uint16_t> tail(size_t(kOutTail) * c.hq * c.dv);
  ASSERT_EQ(cudaMemcpy(tail.data(), static_cast<char*>(o.ptr) + size_t(total_q) * c.hq * c.dv * 2, tail.size() * 2,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  int64_t touched = 0;
  for (uint16_t x : tail) touched += x != 0xFFFF;
  EXPECT_EQ(touched, 0) << "out rows past the last sequence were written";
}

INSTANTIATE_TEST_SUITE_P(Grid, Varlen, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Features, Varlen, ::testing::ValuesIn(feature_cases()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Sm80Features, Varlen, ::testing::ValuesIn(sm80_feature_cases()),
                         [](const auto& info) { return name(info.param); });

// The GPU reference's varlen form (the yardstick above) against the CPU fp64 reference of
// issue 16 (src/reference/cpu_reference_inference.h), element by element.
TEST(VarlenReference, GpuReferenceMatchesCpuFp64) {
  FLASHATTN_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    const std::vector<int> lq{0, 3, 40, 1, 17}, lk{2, 0, 33, 1, 50};
    const std::vector<int> cu_q = offsets(lq), cu_k = offsets(lk);
    const int b = 5, hq = 4, hkv = 2, d = 24, dv = 40;
    const int total_q = cu_q.back(), total_k = cu_k.back();
    const DType dt = DType::kFloat16;
    DeviceBuffer q(size_t(total_q) * hq * d * 2), k(size_t(total_k) * hkv * d * 2), v(size_t(total_k) * hkv * dv * 2),
        o(size_t(total_q) * hq * dv * 2), lse(size_t(hq) * total_q * 4), dcu_q(cu_q.size() * 4), dcu_k(cu_k.size() * 4);
    check::fill_random(q.ptr, dt, int64_t(total_q) * hq * d, 5, 0.1f, 1.f, nullptr);
    check::fill_random(k.ptr, dt, int64_t(total_k) * hkv * d, 6, 0.f, 1.f, nullptr);
    check::fill_random(v.ptr, dt, int64_t(total_k) * hkv * dv, 7, 0.2f, 1.f, nullptr);
    check::poison(o.ptr, dt, int64_t(total_q) * hq * dv, nullptr);
    check::poison(lse.ptr, DType::kFloat32, int64_t(hq) * total_q, nullptr);
    ASSERT_EQ(cudaMemcpy(dcu_q.ptr, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dcu_k.ptr, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ForwardArgs a;
    a.q = make_contiguous(q.ptr, dt, 1, total_q, hq, d);
    a.k = make_contiguous(k.ptr, dt, 1, total_k, hkv, d);
    a.v = make_contiguous(v.ptr, dt, 1, total_k, hkv, dv);
    a.out = make_contiguous(o.ptr, dt, 1, total_q, hq, dv);
    a.lse = static_cast<float*>(lse.ptr);
    a.causal = causal;
    a.backend = Backend::kReference;
    a.cu_seqlens_q = static_cast<const int32_t*>(dcu_q.ptr);
    a.cu_seqlens_k = static_cast<const int32_t*>(dcu_k.ptr);
    a.num_seqs = b;
    a.max_seqlen_q = 40;
    a.max_seqlen_k = 50;
    ASSERT_TRUE(forward(a, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    const std::vector<double> hq_in = to_host(a.q), hk = to_host(a.k), hv = to_host(a.v), ho = to_host(a.out);
    std::vector<float> hlse(size_t(hq) * total_q);
    ASSERT_EQ(cudaMemcpy(hlse.data(), lse.ptr, hlse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ref::VarlenProblem pr;
    pr.b = b, pr.hq = hq, pr.hkv = hkv, pr.d = d, pr.dv = dv, pr.causal = causal;
    std::vector<double> want(ho.size()), want_lse(hlse.size());
    ref::attention_varlen_fp64(pr, cu_q.data(), cu_k.data(), hq_in.data(), hk.data(), hv.data(), want.data(),
                               want_lse.data());
    double err = 0, lse_err = 0;
    for (size_t i = 0; i < ho.size(); ++i) err = std::max(err, std::abs(ho[i] - want[i]));
    for (size_t i = 0; i < hlse.size(); ++i) {
      if (std::isinf(want_lse[i])) {
        EXPECT_TRUE(std::isinf(hlse[i]) && hlse[i] < 0) << "lse " << i;
      } else {
        lse_err = std::max(lse_err, std::abs(hlse[i] - want_lse[i]));
      }
    }
    EXPECT_LE(err, 2e-3) << "causal " << causal;  // fp16 output rounding of O(1) values
    EXPECT_LE(lse_err, 1e-4) << "causal " << causal;
  }
}

}  // namespace
}  // namespace flashattn::testing
