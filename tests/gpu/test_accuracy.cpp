// Accuracy against the naive kernel of the same precision, tighter than the correctness rule's
// factor 2, on inputs with a nonzero mean (out is then dominated by mean(v), so an error in the
// softmax weights shows in full). The max error is mostly the output's own rounding (a whole
// number of ulps), too coarse to tell kernels apart; the fraction of out's elements that differ
// from the fp32 reference (rounded to the dtype) is not: relative to the naive kernel's fraction
// it measured, on these inputs, 0.163-0.172 at D=256 (0.185-0.196 with lazy rescaling, which
// V20 turned off for its 1.3-1.55x cuDNN max error), 0.175-0.178 at D=192 (lazy 0.200-0.205),
// 0.189-0.192 at D=128 (lazy 0.205-0.214), 0.216-0.221 at D=64 (lazy 0.234-0.244). The bounds
// sit between the two (docs/VERSIONS.md, V20).
#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "gpu_util.h"

using namespace flashattn;
using namespace flashattn::testing;

namespace {

// Max error: at most the naive kernel's (measured 0.4-1.0; the rule allows 2).
constexpr double kMaxRatio = 1.0;
// Differing fraction, ours / naive, per head dim (see above).
double max_differ_ratio(int d) { return d <= 64 ? 0.228 : d <= 128 ? 0.198 : d <= 192 ? 0.19 : 0.18; }

class Accuracy : public ::testing::TestWithParam<std::tuple<int, int, DType>> {};

}  // namespace

TEST_P(Accuracy, WithinNaiveSamePrecisionError) {
  FLASHATTN_REQUIRE_GPU();
  const auto [d, s, dt] = GetParam();
  const int b = 2, h = 8;
  const int64_t n = int64_t(b) * s * h * d;
  DeviceBuffer q(n * 2), k(n * 2), v(n * 2), o(n * 2), lse(int64_t(b) * h * s * 4);
  double worst = 0, differ = 0, lowp_differ = 0;
  std::string where;
  for (int trial = 0; trial < 3; ++trial) {
    const uint64_t seed = 1000 * d + s + 17 * trial;
    check::fill_random(q.ptr, dt, n, seed, 0.5f, 1.7f, nullptr);
    check::fill_random(k.ptr, dt, n, seed + 1, 0.5f, 1.7f, nullptr);
    check::fill_random(v.ptr, dt, n, seed + 2, 0.5f, 1.7f, nullptr);
    check::poison(o.ptr, dt, n, nullptr);
    ForwardArgs a;
    a.q = make_contiguous(q.ptr, dt, b, s, h, d);
    a.k = make_contiguous(k.ptr, dt, b, s, h, d);
    a.v = make_contiguous(v.ptr, dt, b, s, h, d);
    a.out = make_contiguous(o.ptr, dt, b, s, h, d);
    a.lse = static_cast<float*>(lse.ptr);
    // The sm90 kernels' numbers (the sm80 family rescales lazily by default: not held to these).
    a.backend = Backend::kSm90;
    Backend chosen;
    const Status rs = resolve_backend(a, &chosen);
    if (rs.code() == StatusCode::kNotSupported) GTEST_SKIP() << rs.message();
    ASSERT_TRUE(rs.ok()) << rs.message();
    ASSERT_TRUE(forward(a).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const check::Report r = check::check_against_reference(a, nullptr);
    ASSERT_TRUE(r.pass) << r.message;
    differ = std::max(differ, r.out_differ);
    lowp_differ = std::max(lowp_differ, r.out_lowp_differ);
    const double ratio = r.out_err / r.out_lowp_err;
    if (ratio > worst) {
      worst = ratio;
      where = std::string(backend_name(chosen)) + " trial " + std::to_string(trial) + ": err " +
              std::to_string(r.out_err) + " vs naive " + std::to_string(r.out_lowp_err);
    }
  }
  RecordProperty("worst_ratio", std::to_string(worst));
  EXPECT_LE(worst, kMaxRatio) << where;
  // The worst trial of each (the inputs are the same three every run: seeded).
  EXPECT_LE(differ / lowp_differ, max_differ_ratio(d))
      << "fraction of out differing from the fp32 reference: " << differ << " vs the naive kernel's " << lowp_differ;
  std::printf("[ accuracy ] d=%d s=%d %s worst ours/naive %.3f differ %.5f naive %.5f\n", d, s,
              dt == DType::kBFloat16 ? "bf16" : "fp16", worst, differ, lowp_differ);
}

INSTANTIATE_TEST_SUITE_P(
    HeadDims, Accuracy,
    ::testing::Combine(::testing::Values(64, 128, 192, 256), ::testing::Values(256, 512, 800),
                       ::testing::Values(DType::kBFloat16, DType::kFloat16)),
    [](const auto& info) {
      return "d" + std::to_string(std::get<0>(info.param)) + "_s" + std::to_string(std::get<1>(info.param)) +
             (std::get<2>(info.param) == DType::kBFloat16 ? "_bf16" : "_fp16");
    });
