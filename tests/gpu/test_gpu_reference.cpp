// The naive GPU reference (backend=reference through the public API) against the fp64 CPU
// reference over the awkward grid, outputs poisoned before each launch.
#include <cmath>
#include <limits>

#include "gpu_util.h"
#include "reference/cpu_reference.h"

using namespace flashattn;
using namespace flashattn::testing;

namespace {

struct Case {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  DType dt;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "b" << c.b << "_sq" << c.sq << "_sk" << c.sk << "_h" << c.hq << "x" << c.hkv << "_d" << c.d
      << (c.causal ? "_causal" : "") << (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16");
}

class GpuReference : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(GpuReference, MatchesCpuFp64) {
  FLASHATTN_REQUIRE_GPU();
  const Case c = GetParam();
  const int64_t nq = int64_t(c.b) * c.sq * c.hq * c.d, nk = int64_t(c.b) * c.sk * c.hkv * c.d;
  DeviceBuffer q(nq * 2), k(nk * 2), v(nk * 2), o(nq * 2), lse(int64_t(c.b) * c.hq * c.sq * 4);
  check::fill_random(q.ptr, c.dt, nq, 11 + c.sq, 0.1f, 1.f, nullptr);
  check::fill_random(k.ptr, c.dt, nk, 12 + c.sk, 0.1f, 1.f, nullptr);
  check::fill_random(v.ptr, c.dt, nk, 13 + c.d, 0.2f, 1.f, nullptr);
  check::poison(o.ptr, c.dt, nq, nullptr);
  check::poison(lse.ptr, DType::kFloat32, int64_t(c.b) * c.hq * c.sq, nullptr);
  ForwardArgs a;
  a.q = make_contiguous(q.ptr, c.dt, c.b, c.sq, c.hq, c.d);
  a.k = make_contiguous(k.ptr, c.dt, c.b, c.sk, c.hkv, c.d);
  a.v = make_contiguous(v.ptr, c.dt, c.b, c.sk, c.hkv, c.d);
  a.out = make_contiguous(o.ptr, c.dt, c.b, c.sq, c.hq, c.d);
  a.lse = static_cast<float*>(lse.ptr);
  a.causal = c.causal;
  a.backend = Backend::kReference;
  const Status s = forward(a);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  ref::Problem pr;
  pr.b = c.b; pr.sq = c.sq; pr.sk = c.sk; pr.hq = c.hq; pr.hkv = c.hkv; pr.d = c.d; pr.causal = c.causal;
  const auto hq = to_host(a.q), hk = to_host(a.k), hv = to_host(a.v), ho = to_host(a.out);
  std::vector<double> ref_o(nq), lowp(nq), ref_l(int64_t(c.b) * c.hq * c.sq);
  ref::attention_fp64(pr, hq.data(), hk.data(), hv.data(), ref_o.data(), ref_l.data());
  ref::attention_lowp(pr, c.dt, hq.data(), hk.data(), hv.data(), lowp.data());
  const auto r = ref::check_rule(ho, ref_o, lowp, check::default_atol(c.dt));
  EXPECT_TRUE(r.pass) << "err " << r.err << " bound " << r.bound;

  std::vector<float> gl(ref_l.size());
  ASSERT_EQ(cudaMemcpy(gl.data(), lse.ptr, gl.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  double lse_err = 0;
  for (size_t i = 0; i < gl.size(); ++i) {
    if (std::isinf(ref_l[i])) {
      EXPECT_EQ(double(gl[i]), ref_l[i]) << "fully masked row " << i;
      continue;
    }
    lse_err = std::isnan(gl[i]) ? INFINITY : std::max(lse_err, std::fabs(gl[i] - ref_l[i]));
  }
  EXPECT_LE(lse_err, 1e-4 * (1 + std::sqrt(double(c.d))));
}

INSTANTIATE_TEST_SUITE_P(
    AwkwardGrid, GpuReference,
    ::testing::Values(Case{1, 1, 1, 1, 1, 64, false, DType::kFloat16},
                      Case{2, 17, 17, 4, 2, 64, true, DType::kBFloat16},
                      Case{1, 113, 113, 8, 1, 128, true, DType::kFloat16},
                      Case{1, 113, 1000, 2, 2, 128, false, DType::kBFloat16},
                      Case{1, 1000, 113, 2, 1, 96, true, DType::kFloat16},  // fully masked rows
                      Case{1, 1023, 1023, 2, 2, 256, true, DType::kBFloat16},
                      Case{3, 2, 1023, 16, 2, 192, false, DType::kFloat16},
                      Case{1, 1000, 1000, 1, 1, 64, false, DType::kBFloat16}));

TEST(DeviceCheck, CatchesAWrongOutputAndPassesTheReference) {
  FLASHATTN_REQUIRE_GPU();
  const int b = 1, s = 257, h = 4, d = 128;
  const DType dt = DType::kBFloat16;
  const int64_t n = int64_t(b) * s * h * d;
  DeviceBuffer q(n * 2), k(n * 2), v(n * 2), o(n * 2), lse(int64_t(b) * h * s * 4);
  check::fill_random(q.ptr, dt, n, 1, 0.1f, 1.f, nullptr);
  check::fill_random(k.ptr, dt, n, 2, 0.1f, 1.f, nullptr);
  check::fill_random(v.ptr, dt, n, 3, 0.2f, 1.f, nullptr);
  ForwardArgs a;
  a.q = make_contiguous(q.ptr, dt, b, s, h, d);
  a.k = make_contiguous(k.ptr, dt, b, s, h, d);
  a.v = make_contiguous(v.ptr, dt, b, s, h, d);
  a.out = make_contiguous(o.ptr, dt, b, s, h, d);
  a.lse = static_cast<float*>(lse.ptr);
  a.causal = true;
  a.backend = Backend::kReference;
  check::poison(o.ptr, dt, n, nullptr);
  ASSERT_TRUE(forward(a).ok());
  EXPECT_TRUE(check::check_against_reference(a, nullptr).pass);
  a.causal = false;  // the output no longer matches the problem: the check must say so
  EXPECT_FALSE(check::check_against_reference(a, nullptr).pass);
  a.causal = true;
  check::poison(o.ptr, dt, n, nullptr);  // an unwritten (NaN) output must fail too
  EXPECT_FALSE(check::check_against_reference(a, nullptr).pass);
}
