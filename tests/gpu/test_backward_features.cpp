// The backward with sliding window, softcap and ALiBi (issue 17) through the public API: dq, dk,
// dv against the naive GPU reference backward (detail::reference_backward, fp32 accumulation;
// it honours every feature and is checked against the CPU fp64 backward elsewhere) under the
// correctness rule, with the low-precision GPU reference (reference_backward_lowp) as the lowp
// term: max|ours - ref| <= 2 max|lowp - ref| + atol per gradient, atol as bwd_check.cpp sets it.
// Gradients are poisoned before every call, rows that see no key must get dq exactly 0, and
// deterministic mode must repeat bitwise. On Hopper, kAuto must pick the sm90 backward for these
// calls (the feature kernels), and kSm90 forced must be served. The same cases with kSm80 run the
// sm80 feature kernels on any device of capability 8.0 or newer: through the public API where
// sm80 dispatch serves the features, else (src/sm80/bwd/launcher.cu kServeFeatures off) through
// detail::sm80_backward directly, so the kernels are checked before dispatch hands them calls.
// The "sm80small" cases run the sm80 small tier's feature kernels (sm86 / sm89's) forced on the
// device (small_tier.h).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "api/backends.h"
#include "api/validate.h"
#include "common/params.h"
#include "deterministic_check.h"
#include "gpu_util.h"
#include "reference/cpu_reference.h"
#include "small_tier.h"

namespace flashattn::testing {
namespace {

struct BwdFeatureCase {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  int left, right;  // window (-1: unbounded)
  float softcap;
  int alibi;  // 0: none, 1: (Hq,), 2: (B, Hq)
  DType dt;
  Backend backend;
  bool deterministic = false;
  bool small = false;  // kSm80 on the small tier's kernels (small_tier.h): what sm86 / sm89 run
};

std::string name(const BwdFeatureCase& c) {
  auto w = [](int x) { return x < 0 ? std::string("inf") : std::to_string(x); };
  return std::string(backend_name(c.backend)) + (c.small ? "small" : "") + "_b" + std::to_string(c.b) + "_d" + std::to_string(c.d) + "_sq" +
         std::to_string(c.sq) + "_sk" + std::to_string(c.sk) + "_h" + std::to_string(c.hq) + "x" + std::to_string(c.hkv) +
         (c.causal ? "_causal" : "") + "_w" + w(c.left) + "_" + w(c.right) +
         (c.softcap > 0 ? "_cap" + std::to_string(static_cast<int>(c.softcap)) : "") +
         (c.alibi ? "_alibi" + std::to_string(c.alibi) : "") + (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") +
         (c.deterministic ? "_det" : "");
}
void PrintTo(const BwdFeatureCase& c, std::ostream* os) { *os << name(c); }

std::vector<BwdFeatureCase> grid() {
  std::vector<BwdFeatureCase> cs;
  const std::pair<int, int> windows[] = {{0, 0}, {1, 0}, {127, 0}, {256, 256}, {1000, 3}, {-1, 0}};
  // Sq == Sk, Sq < Sk, Sq > Sk (rows without keys under a window), partial blocks throughout.
  const std::pair<int, int> lens[] = {{700, 700}, {300, 900}, {900, 300}, {1000, 1000}};
  const std::pair<int, int> heads[] = {{8, 8}, {8, 2}, {4, 1}};  // MHA, GQA 4, MQA
  int i = 0;
  for (Backend be : {Backend::kSm90, Backend::kAuto, Backend::kSm80}) {
    for (int d : {64, 128, 256}) {
      for (auto [l, r] : windows) {
        const auto [sq, sk] = lens[i % 4];
        const auto [hq, hkv] = heads[i % 3];
        // (-1, 0) goes with causal (their intersection is the causal mask); the others
        // alternate, causal meaning the window with right = 0.
        const bool causal = (l < 0) || i % 2 == 1;
        const DType dt = (i / 2) % 2 ? DType::kBFloat16 : DType::kFloat16;
        cs.push_back({1 + i % 2, sq, sk, hq, hkv, d, causal, l, r, 0.f, 0, dt, be});
        ++i;
      }
      // Softcap (no window, causal, with a window) and ALiBi (both slope shapes, with GQA/MQA).
      cs.push_back({2, 517, 517, 4, 2, d, false, -1, -1, 30.f, 0, DType::kBFloat16, be});
      cs.push_back({1, 300, 800, 4, 4, d, true, -1, -1, 30.f, 0, DType::kFloat16, be});
      cs.push_back({1, 640, 640, 4, 2, d, true, 127, 0, 30.f, 0, DType::kBFloat16, be});
      cs.push_back({2, 513, 700, 8, 2, d, false, -1, -1, 0.f, 1, DType::kFloat16, be});
      cs.push_back({2, 700, 513, 8, 2, d, true, -1, -1, 0.f, 2, DType::kBFloat16, be});
      cs.push_back({2, 640, 640, 4, 1, d, true, 256, 0, 30.f, 2, DType::kBFloat16, be});
      cs.push_back({1, 1000, 1000, 4, 2, d, false, 100, 50, 30.f, 1, DType::kFloat16, be});
    }
  }
  // Head dims between the instantiated ones run on the covering kernel with zero-filled columns.
  for (Backend be : {Backend::kSm90, Backend::kSm80}) {
    cs.push_back({1, 517, 700, 4, 2, 96, false, 64, 64, 30.f, 1, DType::kBFloat16, be});
    cs.push_back({1, 700, 517, 4, 4, 40, true, 200, 0, 0.f, 2, DType::kFloat16, be});
  }
  // The small tier's feature kernels: every kernel head dim, windows at both ends and the
  // middle, softcap, both slope shapes, GQA / MQA, Sq != Sk both ways.
  for (int d : {64, 128, 256, 96}) {
    const Backend be = Backend::kSm80;
    BwdFeatureCase small[] = {
        {1, 700, 700, 8, 2, d, true, 0, 0, 0.f, 0, DType::kBFloat16, be},
        {2, 300, 900, 4, 1, d, false, 1000, 3, 0.f, 0, DType::kFloat16, be},
        {1, 900, 300, 8, 8, d, true, 127, 0, 30.f, 0, DType::kBFloat16, be},
        {2, 517, 517, 4, 2, d, false, -1, -1, 30.f, 2, DType::kFloat16, be},
        {1, 1000, 1000, 4, 2, d, false, 256, 256, 0.f, 1, DType::kBFloat16, be},
    };
    for (BwdFeatureCase c : small) {
      c.small = true;
      cs.push_back(c);
    }
  }
  return cs;
}

// Deterministic mode: windows whose query blocks start past key block 0 (the ordered dQ
// additions count from each query block's first key block), GQA, causal windows, both Sq != Sk
// orders, softcap and ALiBi, every kernel head dim.
std::vector<BwdFeatureCase> deterministic_cases() {
  std::vector<BwdFeatureCase> cs;
  for (Backend be : {Backend::kSm90, Backend::kAuto, Backend::kSm80}) {
    for (int d : {64, 128, 256}) {
      cs.push_back({2, 1000, 1000, 8, 2, d, false, 256, 256, 0.f, 0, DType::kBFloat16, be, true});
      cs.push_back({1, 900, 300, 4, 1, d, true, 127, 0, 30.f, 0, DType::kFloat16, be, true});
      cs.push_back({2, 300, 900, 4, 2, d, false, 1000, 3, 0.f, 2, DType::kBFloat16, be, true});
      cs.push_back({1, 700, 700, 4, 4, d, false, 0, 0, 0.f, 1, DType::kFloat16, be, true});
      cs.push_back({1, 517, 517, 4, 2, d, true, -1, -1, 30.f, 1, DType::kBFloat16, be, true});
    }
  }
  for (int d : {64, 128, 256}) {  // the small tier's feature kernels
    cs.push_back({2, 1000, 1000, 8, 2, d, false, 256, 256, 0.f, 0, DType::kBFloat16, Backend::kSm80, true, true});
    cs.push_back({1, 900, 300, 4, 1, d, true, 127, 0, 30.f, 2, DType::kFloat16, Backend::kSm80, true, true});
  }
  return cs;
}

bool device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  cudaGetLastError();
  return major == 9 && minor == 0;
}

bool device_is_sm80_or_newer() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaGetLastError();
  return major >= 8;
}

// Whether query row i sees any key under the case's window and causal flag (bottom-right).
bool row_sees_a_key(const BwdFeatureCase& c, int64_t i) {
  const int64_t diag = i + c.sk - c.sq;
  int64_t lo = c.left < 0 ? 0 : std::max<int64_t>(0, diag - c.left);
  int64_t hi = c.right < 0 ? c.sk - 1 : std::min<int64_t>(c.sk - 1, diag + c.right);
  if (c.causal) hi = std::min(hi, diag);
  return lo <= hi;
}

// Device tensors of one case: inputs, the forward's out and lse, the gradients under test and
// the two reference backwards' gradients.
struct Buffers {
  BwdFeatureCase c;
  int64_t nq, nk;
  DeviceBuffer q, k, v, dout, out, lse, slopes, dq, dk, dv, rdq, rdk, rdv, ldq, ldk, ldv;

  explicit Buffers(const BwdFeatureCase& cs)
      : c(cs),
        nq(int64_t(cs.b) * cs.sq * cs.hq * cs.d),
        nk(int64_t(cs.b) * cs.sk * cs.hkv * cs.d),
        q(nq * 2), k(nk * 2), v(nk * 2), dout(nq * 2), out(nq * 2),
        lse(size_t(cs.b) * cs.hq * cs.sq * 4), slopes(size_t(cs.b) * cs.hq * 4),
        dq(nq * 2), dk(nk * 2), dv(nk * 2), rdq(nq * 2), rdk(nk * 2), rdv(nk * 2),
        ldq(nq * 2), ldk(nk * 2), ldv(nk * 2) {}

  TensorRef tq(void* p) const { return make_contiguous(p, c.dt, c.b, c.sq, c.hq, c.d); }
  TensorRef tk(void* p) const { return make_contiguous(p, c.dt, c.b, c.sk, c.hkv, c.d); }

  void fill(uint64_t seed) {
    // Softcap: elements uniform in +-6 put scaled scores (standard deviation ~12 at any head
    // dim) into tanh's bend at 30. Else a nonzero mean, so rowsum(dO * O) matters.
    const float mean = c.softcap > 0 ? 0.f : 0.3f, half = c.softcap > 0 ? 6.f : 1.f;
    check::fill_random(q.ptr, c.dt, nq, seed, mean, half, nullptr);
    check::fill_random(k.ptr, c.dt, nk, seed + 1, mean, half, nullptr);
    check::fill_random(v.ptr, c.dt, nk, seed + 2, -0.4f, 1.f, nullptr);
    check::fill_random(dout.ptr, c.dt, nq, seed + 3, 0.5f, 1.7f, nullptr);
    std::vector<float> hs(size_t(c.b) * c.hq);
    for (size_t i = 0; i < hs.size(); ++i) hs[i] = 0.5f / float(1 + i % 7) + 0.01f * float(i / c.hq);
    EXPECT_EQ(cudaMemcpy(slopes.ptr, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }

  template <class Args>
  void set_features(Args* a) const {
    a->causal = c.causal;
    a->window_left = c.left;
    a->window_right = c.right;
    a->softcap = c.softcap;
    if (c.alibi) {
      a->alibi_slopes = static_cast<const float*>(slopes.ptr);
      a->alibi_batch_stride = c.alibi == 2 ? c.hq : 0;
    }
  }

  // out and lse: the sm90 forward where it serves the call (kAuto), else the reference.
  Status forward() {
    ForwardArgs f;
    f.q = tq(q.ptr);
    f.k = tk(k.ptr);
    f.v = tk(v.ptr);
    f.out = tq(out.ptr);
    f.lse = static_cast<float*>(lse.ptr);
    set_features(&f);
    f.backend = Backend::kAuto;
    return flashattn::forward(f, nullptr);
  }

  BackwardArgs args(void* gq, void* gk, void* gv, Backend backend, bool deterministic) const {
    BackwardArgs a;
    a.dout = tq(dout.ptr);
    a.q = tq(q.ptr);
    a.k = tk(k.ptr);
    a.v = tk(v.ptr);
    a.out = tq(out.ptr);
    a.lse = static_cast<const float*>(lse.ptr);
    a.dq = tq(gq);
    a.dk = tk(gk);
    a.dv = tk(gv);
    set_features(&a);
    a.deterministic = deterministic;
    a.backend = backend;
    return a;
  }

  void poison_grads() {
    check::poison(dq.ptr, c.dt, nq, nullptr);
    check::poison(dk.ptr, c.dt, nk, nullptr);
    check::poison(dv.ptr, c.dt, nk, nullptr);
  }

  std::vector<uint8_t> grad_bytes() const {
    std::vector<uint8_t> bytes(size_t(nq + 2 * nk) * 2);
    EXPECT_EQ(cudaMemcpy(bytes.data(), dq.ptr, size_t(nq) * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(bytes.data() + nq * 2, dk.ptr, size_t(nk) * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(bytes.data() + (nq + nk) * 2, dv.ptr, size_t(nk) * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return bytes;
  }

  // Both GPU reference backwards into their own gradients.
  Status references() {
    detail::BwdParams p;
    bool empty = false;
    Status s = detail::validate_and_convert(args(rdq.ptr, rdk.ptr, rdv.ptr, Backend::kReference, false), &p, &empty);
    if (!s.ok()) return s;
    s = detail::reference_backward(p, nullptr);
    if (!s.ok()) return s;
    s = detail::validate_and_convert(args(ldq.ptr, ldk.ptr, ldv.ptr, Backend::kReference, false), &p, &empty);
    if (!s.ok()) return s;
    return detail::reference_backward_lowp(p, nullptr);
  }

  // The rule per gradient, NaN, and dq exactly 0 on rows without keys; empty when all pass.
  std::string check() const {
    std::string msg;
    const std::vector<double> ours[3] = {to_host(tq(dq.ptr)), to_host(tk(dk.ptr)), to_host(tk(dv.ptr))};
    const std::vector<double> ref[3] = {to_host(tq(rdq.ptr)), to_host(tk(rdk.ptr)), to_host(tk(rdv.ptr))};
    const std::vector<double> low[3] = {to_host(tq(ldq.ptr)), to_host(tk(ldk.ptr)), to_host(tk(ldv.ptr))};
    const char* names[3] = {"dq", "dk", "dv"};
    double mags[3] = {0, 0, 0};
    for (int t = 0; t < 3; ++t)
      for (double x : ref[t]) mags[t] = std::max(mags[t], std::fabs(x));
    for (int t = 0; t < 3; ++t) {
      const auto nans = std::count_if(ours[t].begin(), ours[t].end(), [](double x) { return std::isnan(x); });
      if (nans > 0) msg += std::string(names[t]) + ": " + std::to_string(nans) + " NaN; ";
      // As bwd_check.cpp: atol scales with the tensor, dK's with dV's magnitude too.
      const double mag = t == 1 ? std::max(mags[1], mags[2]) : mags[t];
      const double atol = check::default_atol(c.dt) * std::max(1.0, mag);
      const ref::RuleResult r = ref::check_rule(ours[t], ref[t], low[t], atol);
      if (!r.pass)
        msg += std::string(names[t]) + ": err " + std::to_string(r.err) + " > bound " + std::to_string(r.bound) +
               " (lowp err " + std::to_string(r.lowp_err) + ", max|ref| " + std::to_string(mag) + "); ";
    }
    int64_t nonzero = 0;
    for (int b = 0; b < c.b; ++b)
      for (int i = 0; i < c.sq; ++i) {
        if (row_sees_a_key(c, i)) continue;
        for (int64_t e = 0; e < int64_t(c.hq) * c.d; ++e) nonzero += ours[0][(int64_t(b) * c.sq + i) * c.hq * c.d + e] != 0.0;
      }
    if (nonzero > 0) msg += "dq: " + std::to_string(nonzero) + " nonzero elements on rows without keys; ";
    return msg;
  }
};

uint64_t seed_of(const BwdFeatureCase& c) {
  return 1000003ull * c.sq + 1009ull * c.sk + 31ull * c.d + 7ull * (c.left + 2) + 3ull * (c.right + 2) + c.hq +
         (c.causal ? 5 : 0) + (c.alibi ? 11 : 0) + (c.softcap > 0 ? 13 : 0);
}

// Resolves the backend; on Hopper both kSm90 and kAuto must give the sm90 backward. Elsewhere a
// forced kSm90 skips (kAuto runs whatever serves it: the reference).
#define RESOLVE_FEATURE_BACKEND(args, chosen)                                                       \
  do {                                                                                              \
    const Status rs_ = resolve_backend(args, &(chosen));                                            \
    if (!device_is_sm90()) {                                                                        \
      if (!rs_.ok()) GTEST_SKIP() << rs_.message();                                                 \
    } else {                                                                                        \
      ASSERT_TRUE(rs_.ok()) << rs_.message();                                                       \
      ASSERT_EQ(chosen, Backend::kSm90) << "the sm90 backward must serve window/softcap/ALiBi calls"; \
    }                                                                                               \
  } while (0)

// The kSm80 cases: skip where the family is not built or the device predates sm80; else the
// public API serves them if sm80 dispatch takes the features (and must pick sm80), and the
// family entry runs them directly while it does not (a dense call refused only for its
// features: sm80_backward's documented precondition).
#define REQUIRE_SM80_FEATURE_BACKEND(args)                                                     \
  do {                                                                                         \
    if (!detail::sm80_built()) GTEST_SKIP() << "the sm80 family is not built";                 \
    if (!device_is_sm80_or_newer()) GTEST_SKIP() << "the device predates sm80";                \
    detail::BwdParams p_;                                                                      \
    bool empty_ = false;                                                                       \
    ASSERT_TRUE(detail::validate_and_convert(args, &p_, &empty_).ok());                        \
    if (detail::sm80_supports(p_).ok()) {                                                      \
      Backend chosen_ = Backend::kAuto;                                                        \
      const Status rs_ = resolve_backend(args, &chosen_);                                      \
      ASSERT_TRUE(rs_.ok()) << rs_.message();                                                  \
      ASSERT_EQ(chosen_, Backend::kSm80) << "a forced sm80 must serve window/softcap/ALiBi calls"; \
    }                                                                                          \
  } while (0)

// One backward call of the case: the public API, or for kSm80 while sm80 dispatch does not take
// the features, detail::sm80_backward on the validated params; the small tier's kernels for the
// small cases.
Status run_backward(const BwdFeatureCase& c, const BackwardArgs& a) {
  if (c.small) return small_tier_backward(a, nullptr);
  if (a.backend == Backend::kSm80) {
    detail::BwdParams p;
    bool empty = false;
    Status s = detail::validate_and_convert(a, &p, &empty);
    if (!s.ok()) return s;
    if (!empty && !detail::sm80_supports(p).ok()) return detail::sm80_backward(p, nullptr);
  }
  return backward(a);
}

class BackwardFeatures : public ::testing::TestWithParam<BwdFeatureCase> {};
class BackwardFeaturesDeterministic : public ::testing::TestWithParam<BwdFeatureCase> {};

TEST_P(BackwardFeatures, MatchesGpuReference) {
  FLASHATTN_REQUIRE_GPU();
  const BwdFeatureCase c = GetParam();
  if (c.small) REQUIRE_SMALL_TIER();
  Buffers buf(c);
  const BackwardArgs a = buf.args(buf.dq.ptr, buf.dk.ptr, buf.dv.ptr, c.backend, c.deterministic);
  Backend chosen = c.backend;
  if (c.backend == Backend::kSm80) {
    REQUIRE_SM80_FEATURE_BACKEND(a);
  } else {
    RESOLVE_FEATURE_BACKEND(a, chosen);
  }
  buf.fill(seed_of(c));
  ASSERT_TRUE(buf.forward().ok());
  ASSERT_TRUE(buf.references().ok());
  buf.poison_grads();
  const Status s = run_backward(c, a);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::string msg = buf.check();
  EXPECT_TRUE(msg.empty()) << backend_name(chosen) << ": " << msg;
}

TEST_P(BackwardFeaturesDeterministic, BitwiseAcrossRuns) {
  FLASHATTN_REQUIRE_GPU();
  const BwdFeatureCase c = GetParam();
  if (c.small) REQUIRE_SMALL_TIER();
  Buffers buf(c);
  const BackwardArgs a = buf.args(buf.dq.ptr, buf.dk.ptr, buf.dv.ptr, c.backend, true);
  Backend chosen = c.backend;
  if (c.backend == Backend::kSm80) {
    REQUIRE_SM80_FEATURE_BACKEND(a);
  } else {
    RESOLVE_FEATURE_BACKEND(a, chosen);
  }
  buf.fill(seed_of(c) + 5);
  ASSERT_TRUE(buf.forward().ok());
  ASSERT_TRUE(buf.references().ok());
  // The default stream only (run_backward takes none).
  expect_bitwise_deterministic(
      {/*runs=*/5, /*side_runs=*/0}, std::string(backend_name(chosen)) + ": ",
      [&](cudaStream_t) { buf.poison_grads(); }, [&](cudaStream_t) { return run_backward(c, a); },
      [&] { return buf.grad_bytes(); },
      [&]() -> ::testing::AssertionResult {
        const std::string msg = buf.check();
        if (msg.empty()) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << backend_name(chosen) << ": " << msg;
      });
}

INSTANTIATE_TEST_SUITE_P(Grid, BackwardFeatures, ::testing::ValuesIn(grid()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Repeat, BackwardFeaturesDeterministic, ::testing::ValuesIn(deterministic_cases()),
                         [](const auto& info) { return name(info.param); });

}  // namespace
}  // namespace flashattn::testing
