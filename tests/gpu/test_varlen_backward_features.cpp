// The varlen backward with a sliding window, softcap or ALiBi (issues 16 and 17) through the
// public API, the sm90 and sm80 backends forced: dq, dk, dv of the packed batch against the naive
// GPU reference backward of the same varlen call (detail::reference_backward, fp32 accumulation;
// it is checked against the CPU fp64 references by VarlenReference and the feature tests) under
// the correctness rule, with reference_backward_lowp as the low-precision yardstick. Per
// sequence the window is bottom-right with the sequence's own lengths, and (num_seqs, Hq) slopes
// take the sequence's row. The "sm80small" cases run the sm80 small tier's kernels (sm86 / sm89's)
// forced on the device (small_tier.h). Inputs as test_varlen_backward.cpp: NaN in every row outside the
// sequences, poisoned gradients whose rows outside the sequences must keep their bits.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "api/backends.h"
#include "api/validate.h"
#include "common/params.h"
#include "gpu_util.h"
#include "reference/cpu_reference.h"
#include "small_tier.h"
#include "varlen_bwd_buffers.h"

namespace flashattn::testing {
namespace {

struct VarlenFeatureBwdCase {
  Backend backend;
  int d;
  bool causal;
  int left, right;  // window_size; -1 unbounded
  float softcap;
  int alibi;  // 0: none, 1: (Hq,), 2: (num_seqs, Hq)
  bool small = false;  // kSm80 on the small tier's kernels (small_tier.h): what sm86 / sm89 run
};

std::string name(const VarlenFeatureBwdCase& c) {
  auto side = [](int w) { return w < 0 ? std::string("u") : std::to_string(w); };
  return std::string(backend_name(c.backend)) + (c.small ? "small" : "") + "_d" + std::to_string(c.d) + (c.causal ? "_causal" : "_full") + "_w" +
         side(c.left) + "_" + side(c.right) + (c.softcap > 0 ? "_cap" + std::to_string(int(c.softcap)) : "") +
         (c.alibi ? "_alibi" + std::to_string(c.alibi) : "");
}
void PrintTo(const VarlenFeatureBwdCase& c, std::ostream* os) { *os << name(c); }

std::vector<VarlenFeatureBwdCase> cases() {
  // The windows, softcap 30 / 50, both slope shapes; each backend and kernel head dim.
  const VarlenFeatureBwdCase shapes[] = {
      {Backend::kAuto, 0, true, 127, 0, 0.f, 0},   {Backend::kAuto, 0, false, 256, 256, 30.f, 0},
      {Backend::kAuto, 0, false, 1000, 3, 0.f, 2}, {Backend::kAuto, 0, true, 0, 0, 50.f, 1},
      {Backend::kAuto, 0, false, 1, 0, 0.f, 0},    {Backend::kAuto, 0, true, -1, -1, 30.f, 2},
  };
  std::vector<VarlenFeatureBwdCase> cs;
  for (Backend be : {Backend::kSm90, Backend::kSm80})
    for (int d : {64, 128, 256})
      for (size_t i = 0; i < std::size(shapes); ++i) {
        if (d == 256 && i % 2 == 1) continue;  // fewer at D=256: the references' time
        VarlenFeatureBwdCase c = shapes[i];
        c.backend = be;
        c.d = d;
        cs.push_back(c);
      }
  // The small tier's varlen feature kernels: each head dim, half the shapes.
  for (int d : {64, 128, 256})
    for (size_t i = d == 128 ? 1 : 0; i < std::size(shapes); i += 2) {
      VarlenFeatureBwdCase c = shapes[i];
      c.backend = Backend::kSm80;
      c.d = d;
      c.small = true;
      cs.push_back(c);
    }
  return cs;
}

class VarlenBackwardFeatures : public ::testing::TestWithParam<VarlenFeatureBwdCase> {};

TEST_P(VarlenBackwardFeatures, MatchesReferenceAndTouchesOnlyItsRows) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenFeatureBwdCase c = GetParam();
  if (c.small) REQUIRE_SMALL_TIER();
  // Lengths 0 and 1, Sq != Sk both ways, a sequence with keys but no queries and one the other
  // way round; GQA 4.
  const std::vector<int> lq{0, 1, 17, 300, 129, 0, 9}, lk{3, 1, 40, 411, 64, 5, 0};
  const int hq = 8, hkv = 2;
  const DType dt = c.d == 128 ? DType::kFloat16 : DType::kBFloat16;
  VarlenBwdBuffers buf(lq, lk, hq, hkv, c.d, dt);
  const int num_seqs = int(lq.size());
  DeviceBuffer slopes(size_t(num_seqs) * hq * sizeof(float));
  std::vector<float> hs(size_t(num_seqs) * hq);
  for (size_t i = 0; i < hs.size(); ++i) hs[i] = 0.5f / float(1 + i % 7) + 0.01f * float(i / hq);
  ASSERT_EQ(cudaMemcpy(slopes.ptr, hs.data(), hs.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  auto features = [&](auto* a) {
    a->window_left = c.left;
    a->window_right = c.right;
    a->softcap = c.softcap;
    if (c.alibi) {
      a->alibi_slopes = static_cast<const float*>(slopes.ptr);
      a->alibi_batch_stride = c.alibi == 2 ? hq : 0;
    }
  };
  BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/false);
  features(&args);
  Backend chosen{};
  const Status rs = resolve_backend(args, &chosen);
  if (rs.code() == StatusCode::kNotSupported || rs.message().find("compute capability") != std::string::npos)
    GTEST_SKIP() << rs.message();
  ASSERT_TRUE(rs.ok()) << rs.message();
  ASSERT_EQ(chosen, c.backend);

  buf.fill(7919ull * c.d + 31ull * c.left + c.alibi + (c.causal ? 3 : 0), /*wide=*/c.softcap > 0);
  ForwardArgs f = buf.fwd_args(c.causal);
  features(&f);
  f.backend = Backend::kReference;  // out and lse: the reference's, so only the backward is under test
  Status s = forward(f, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  buf.poison_grads(nullptr);
  s = c.small ? small_tier_backward(args, nullptr) : backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<double> ours[3] = {to_host(args.dq), to_host(args.dk), to_host(args.dv)};
  EXPECT_EQ(buf.touched_outside(), 0) << "gradient rows outside every sequence were written";

  // Both GPU reference backwards of the same call, into the gradient buffers in turn.
  std::vector<double> refs[2][3];
  for (int lowp = 0; lowp < 2; ++lowp) {
    BackwardArgs ra = args;
    ra.backend = Backend::kReference;
    detail::BwdParams p;
    bool empty = false;
    ASSERT_TRUE(detail::validate_and_convert(ra, &p, &empty).ok());
    buf.poison_grads(nullptr);
    s = lowp ? detail::reference_backward_lowp(p, nullptr) : detail::reference_backward(p, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    refs[lowp][0] = to_host(args.dq);
    refs[lowp][1] = to_host(args.dk);
    refs[lowp][2] = to_host(args.dv);
  }

  // The rule over the rows inside the sequences (outside, all three hold the poison).
  const char* names[3] = {"dq", "dk", "dv"};
  const std::vector<int>* cus[3] = {&buf.cu_q, &buf.cu_k, &buf.cu_k};
  const int heads[3] = {hq, hkv, hkv};
  double mags[3] = {0, 0, 0};
  std::vector<double> in[3][3];  // [tensor][ours, ref, lowp]
  for (int t = 0; t < 3; ++t) {
    const int64_t row = int64_t(heads[t]) * c.d, e0 = cus[t]->front() * row, e1 = cus[t]->back() * row;
    const std::vector<double>* src[3] = {&ours[t], &refs[0][t], &refs[1][t]};
    for (int w = 0; w < 3; ++w) in[t][w].assign(src[w]->begin() + e0, src[w]->begin() + e1);
    for (double x : in[t][1]) mags[t] = std::max(mags[t], std::fabs(x));
  }
  for (int t = 0; t < 3; ++t) {
    const auto nans = std::count_if(in[t][0].begin(), in[t][0].end(), [](double x) { return std::isnan(x); });
    EXPECT_EQ(nans, 0) << names[t] << ": NaN";
    const double mag = t == 1 ? std::max(mags[1], mags[2]) : mags[t];  // as test_backward_features.cpp
    const double atol = check::default_atol(dt) * std::max(1.0, mag);
    const ref::RuleResult r = ref::check_rule(in[t][0], in[t][1], in[t][2], atol);
    EXPECT_TRUE(r.pass) << backend_name(chosen) << " " << names[t] << ": err " << r.err << " > bound " << r.bound
                        << " (lowp err " << r.lowp_err << ", max|ref| " << mag << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Features, VarlenBackwardFeatures, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

}  // namespace
}  // namespace flashattn::testing
