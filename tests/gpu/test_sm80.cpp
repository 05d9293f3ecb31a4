// sm80 family through the public API (Backend::kSm80): awkward shapes, GQA, causal both ways,
// both dtypes, every head dim, lse checked, outputs poisoned. The per-kernel sweep over every
// tuning candidate and library kernel is `flashattn-sm80-tune --check` (configure with
// -DFLASHATTN_SM80_TUNER=ON).
#include <gtest/gtest.h>

#include <tuple>

#include "gpu_util.h"

namespace flashattn::testing {
namespace {

using Sm80Case = std::tuple<int /*d*/, DType, bool /*causal*/, int /*sq*/, int /*sk*/>;

class Sm80Forward : public ::testing::TestWithParam<Sm80Case> {};

TEST_P(Sm80Forward, MatchesReference) {
  FLASHATTN_REQUIRE_GPU();
  const auto [d, dt, causal, sq, sk] = GetParam();
  const int b = 2, hq = 4, hkv = 2;
  DeviceBuffer q(size_t(b) * sq * hq * d * 2), k(size_t(b) * sk * hkv * d * 2), v(size_t(b) * sk * hkv * d * 2),
      o(size_t(b) * sq * hq * d * 2), lse(size_t(b) * hq * sq * 4);
  check::fill_random(q.ptr, dt, int64_t(b) * sq * hq * d, 1, 0.3f, 1.f, nullptr);
  check::fill_random(k.ptr, dt, int64_t(b) * sk * hkv * d, 2, 0.2f, 1.f, nullptr);
  check::fill_random(v.ptr, dt, int64_t(b) * sk * hkv * d, 3, -0.4f, 1.5f, nullptr);
  check::poison(o.ptr, dt, int64_t(b) * sq * hq * d, nullptr);
  check::poison(lse.ptr, DType::kFloat32, int64_t(b) * hq * sq, nullptr);
  ForwardArgs a;
  a.q = make_contiguous(q.ptr, dt, b, sq, hq, d);
  a.k = make_contiguous(k.ptr, dt, b, sk, hkv, d);
  a.v = make_contiguous(v.ptr, dt, b, sk, hkv, d);
  a.out = make_contiguous(o.ptr, dt, b, sq, hq, d);
  a.lse = static_cast<float*>(lse.ptr);
  a.causal = causal;
  a.backend = Backend::kSm80;
  const Status st = forward(a, nullptr);
  if (st.code() == StatusCode::kNotSupported) GTEST_SKIP() << st.message();
  ASSERT_TRUE(st.ok()) << st.message();
  const check::Report r = check::check_against_reference(a, nullptr);
  EXPECT_TRUE(r.pass) << r.message;
  EXPECT_TRUE(r.lse_checked);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Sm80Forward,
    ::testing::Combine(::testing::Values(64, 128, 256), ::testing::Values(DType::kFloat16, DType::kBFloat16),
                       ::testing::Bool(), ::testing::Values(1, 17, 113, 1000),
                       ::testing::Values(1, 113, 1000)));

}  // namespace
}  // namespace flashattn::testing
