// The varlen backward (BackwardArgs' cu_seqlens fields) through the public API, per backend:
// dq, dk, dv of every sequence against the CPU fp64 backward under the correctness rule
// (bwd_check.h check_backward_varlen: the rule once over all sequences). Every case:
//  - fresh random inputs with a nonzero mean; sequences of lengths 0, 1, 17, 113, 1000, mixed
//    and very unequal, q and k lengths that differ (causal is bottom-right per sequence), a
//    sequence with queries but no keys (dq 0) and one with keys but no queries (dk = dv = 0);
//  - rows before cu_seqlens_*[0] and past cu_seqlens_*[num_seqs] of q, k, v, out and dout hold
//    NaN (and lse there too), so a kernel that lets a row outside the sequences reach a result
//    (even as P = 0 times it) fails;
//  - dq, dk, dv poisoned before the call: a row inside a sequence left unwritten fails the rule,
//    and every row outside the sequences must keep its poison bits.
// Deterministic mode: bitwise-equal gradients run after run and on a second stream. Calls
// without queries or keys zero exactly the rows inside the sequences. The "sm80small" cases run
// the sm80 small tier's varlen kernels (sm86 / sm89's) forced on the device (small_tier.h).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bwd_check.h"
#include "deterministic_check.h"
#include "gpu_util.h"
#include "small_tier.h"
#include "varlen_bwd_buffers.h"

namespace flashattn::testing {
namespace {

struct VarlenBwdCase {
  const char* lengths;
  std::vector<int> lq, lk;
  int hq, hkv, d;
  bool causal;
  DType dt;
  Backend backend;
  bool small = false;  // kSm80 on the small tier's kernels (small_tier.h): what sm86 / sm89 run
};

std::string name(const VarlenBwdCase& c) {
  return std::string(backend_name(c.backend)) + (c.small ? "small" : "") + "_" + c.lengths + "_d" + std::to_string(c.d) +
         (c.causal ? "_causal" : "_full") + (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") + "_h" + std::to_string(c.hq) +
         "x" + std::to_string(c.hkv);
}
void PrintTo(const VarlenBwdCase& c, std::ostream* os) { *os << name(c); }

struct Lengths {
  const char* name;
  std::vector<int> lq, lk;
};

std::vector<Lengths> length_sets() {
  std::vector<int> skew_q{1000}, skew_k{1000};  // one long sequence, many short ones
  for (int i = 1; i <= 20; ++i) {
    skew_q.push_back(i % 7 == 0 ? 0 : i * 7 % 61);
    skew_k.push_back(i % 9 == 0 ? 0 : i * 13 % 97);
  }
  return {
      // lengths 0, 1, 17, 113, 1000; (0, 5): keys without queries; (9, 0): queries without keys
      {"mixed", {0, 1, 17, 113, 1000, 0, 9}, {3, 1, 17, 113, 1000, 5, 0}},
      {"differ", {113, 1000, 17, 1}, {1000, 113, 1, 17}},  // Sq < Sk, Sq > Sk (rows without keys)
      {"skewed", skew_q, skew_k},
  };
}

std::vector<VarlenBwdCase> cases() {
  std::vector<VarlenBwdCase> cs;
  const std::vector<Lengths> sets = length_sets();
  // GQA ratios 1, 4, 8; head dims of the three kernels and 96 (zero-filled columns on 128's).
  const std::pair<int, int> heads[] = {{2, 2}, {8, 2}, {8, 1}};
  for (Backend be : {Backend::kSm90, Backend::kSm80, Backend::kReference, Backend::kAuto}) {
    int i = 0;
    for (int d : {64, 128, 256, 96})
      for (bool causal : {false, true}) {
        const Lengths& l = sets[i % 3];
        const auto [hq, hkv] = heads[(i / 3 + i) % 3];
        const DType dt = i % 2 ? DType::kBFloat16 : DType::kFloat16;
        ++i;
        cs.push_back({l.name, l.lq, l.lk, hq, hkv, d, causal, dt, be});
      }
  }
  // The small tier's varlen kernels, each head dim and mask.
  int i = 0;
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      const Lengths& l = sets[i % 3];
      const auto [hq, hkv] = heads[i % 3];
      cs.push_back({l.name, l.lq, l.lk, hq, hkv, d, causal, i % 2 ? DType::kFloat16 : DType::kBFloat16,
                    Backend::kSm80, /*small=*/true});
      ++i;
    }
  return cs;
}

// The case's backward: the public API, or the small tier's kernels.
Status run_backward(const VarlenBwdCase& c, const BackwardArgs& args, cudaStream_t st) {
  return c.small ? small_tier_backward(args, st) : backward(args, st);
}


uint64_t seed_of(const VarlenBwdCase& c) { return 7919ull * c.d + 131ull * c.hq + c.hkv + (c.causal ? 3 : 0) + c.lq.size(); }

// Forward with the case's backend when it serves varlen, else the reference (lse and out are
// the backward's inputs either way).
void run_forward(const VarlenBwdBuffers& buf, bool causal, Backend backend) {
  ForwardArgs f = buf.fwd_args(causal);
  f.backend = backend;
  Backend chosen{};
  if (!resolve_backend(f, &chosen).ok()) f.backend = Backend::kReference;
  const Status s = forward(f, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
}

#define RESOLVE_OR_SKIP(args, chosen)                                                                        \
  do {                                                                                                       \
    const Status rs_ = resolve_backend(args, &(chosen));                                                     \
    if (rs_.code() == StatusCode::kNotSupported || rs_.message().find("compute capability") != std::string::npos) \
      GTEST_SKIP() << rs_.message();                                                                         \
    ASSERT_TRUE(rs_.ok()) << rs_.message();                                                                  \
  } while (0)

class VarlenBackward : public ::testing::TestWithParam<VarlenBwdCase> {};

TEST_P(VarlenBackward, MatchesFp64AndTouchesOnlyItsRows) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenBwdCase c = GetParam();
  if (c.small) REQUIRE_SMALL_TIER();
  VarlenBwdBuffers buf(c.lq, c.lk, c.hq, c.hkv, c.d, c.dt);
  const BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/false);
  Backend chosen{};
  RESOLVE_OR_SKIP(args, chosen);
  if (c.backend == Backend::kAuto) {
    EXPECT_NE(chosen, Backend::kReference) << "auto fell back to the reference";
  }
  buf.fill(seed_of(c));
  run_forward(buf, c.causal, c.backend);
  buf.poison_grads(nullptr);
  const Status s = run_backward(c, args, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const BwdReport r = check_backward_varlen(args, buf.cu_q, buf.cu_k);
  EXPECT_TRUE(r.pass) << backend_name(chosen) << ": " << r.message;
  EXPECT_EQ(buf.touched_outside(), 0) << "gradient rows outside every sequence were written";
}

INSTANTIATE_TEST_SUITE_P(Grid, VarlenBackward, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

class VarlenBackwardDeterministic : public ::testing::TestWithParam<VarlenBwdCase> {};

TEST_P(VarlenBackwardDeterministic, BitwiseAcrossRunsAndStreams) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenBwdCase c = GetParam();
  if (c.small) REQUIRE_SMALL_TIER();
  VarlenBwdBuffers buf(c.lq, c.lk, c.hq, c.hkv, c.d, c.dt);
  const BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/true);
  Backend chosen{};
  RESOLVE_OR_SKIP(args, chosen);
  buf.fill(seed_of(c) + 5);
  run_forward(buf, c.causal, c.backend);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_bitwise_deterministic(
      {/*runs=*/10, /*side_runs=*/1}, std::string(backend_name(chosen)) + ": ",
      [&](cudaStream_t st) { buf.poison_grads(st); }, [&](cudaStream_t st) { return run_backward(c, args, st); },
      [&] { return buf.grad_bytes(); },
      [&]() -> ::testing::AssertionResult {
        const BwdReport r = check_backward_varlen(args, buf.cu_q, buf.cu_k, /*budget=*/0);
        if (r.pass) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << r.message;
      });
}

// zero_outside_rows: the rows outside the sequences (poisoned before the call) become 0, the
// rows inside are bitwise those of the same deterministic call without it.
class VarlenBackwardZeroOutside : public ::testing::TestWithParam<VarlenBwdCase> {};

TEST_P(VarlenBackwardZeroOutside, ZeroesOutsideRowsAndKeepsTheRest) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenBwdCase c = GetParam();
  VarlenBwdBuffers buf(c.lq, c.lk, c.hq, c.hkv, c.d, c.dt);
  BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/true);
  Backend chosen{};
  RESOLVE_OR_SKIP(args, chosen);
  buf.fill(seed_of(c) + 9);
  run_forward(buf, c.causal, c.backend);
  buf.poison_grads(nullptr);
  Status s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_GT(buf.outside_not(0), 0) << "the case must have rows outside its sequences";
  const std::vector<uint8_t> plain = buf.inside_grad_bytes();
  args.zero_outside_rows = true;
  buf.poison_grads(nullptr);
  s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(buf.outside_not(0), 0) << backend_name(chosen) << ": outside rows not zeroed";
  EXPECT_TRUE(buf.inside_grad_bytes() == plain) << backend_name(chosen) << ": rows inside the sequences changed";
}

std::vector<VarlenBwdCase> deterministic_cases() {
  const std::vector<Lengths> sets = length_sets();
  std::vector<VarlenBwdCase> cs;
  for (Backend be : {Backend::kSm90, Backend::kSm80, Backend::kReference})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        cs.push_back({sets[d == 128 ? 2 : 0].name, sets[d == 128 ? 2 : 0].lq, sets[d == 128 ? 2 : 0].lk, 8, 2, d, causal,
                      causal ? DType::kBFloat16 : DType::kFloat16, be});
  return cs;
}

// The small tier's varlen kernels in deterministic mode.
std::vector<VarlenBwdCase> small_deterministic_cases() {
  std::vector<VarlenBwdCase> cs;
  for (VarlenBwdCase c : deterministic_cases()) {
    if (c.backend != Backend::kSm80) continue;
    c.small = true;
    cs.push_back(c);
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Grid, VarlenBackwardDeterministic, ::testing::ValuesIn(deterministic_cases()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Small, VarlenBackwardDeterministic, ::testing::ValuesIn(small_deterministic_cases()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Grid, VarlenBackwardZeroOutside, ::testing::ValuesIn(deterministic_cases()),
                         [](const auto& info) { return name(info.param); });

// No sequence has a query (every lq 0), or none has a key: nothing flows, and exactly the
// gradient rows inside the sequences are zeroed.
TEST(VarlenBackwardEmpty, ZeroesOnlyRowsInsideSequences) {
  FLASHATTN_REQUIRE_GPU();
  for (bool no_queries : {true, false}) {
    const std::vector<int> lq = no_queries ? std::vector<int>{0, 0, 0} : std::vector<int>{5, 0, 70};
    const std::vector<int> lk = no_queries ? std::vector<int>{4, 0, 130} : std::vector<int>{0, 0, 0};
    VarlenBwdBuffers buf(lq, lk, 4, 2, 64, DType::kBFloat16);
    buf.fill(11);
    // out / lse of such a call: out 0, lse -inf on the rows inside (what the forward gives).
    ASSERT_EQ(cudaMemset(buf.fwd_args(false).out.data, 0, size_t(buf.rows_q) * 4 * 64 * 2), cudaSuccess);
    const BackwardArgs args = buf.args(/*causal=*/false, Backend::kAuto, false);
    buf.poison_grads(nullptr);
    const Status s = backward(args);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(buf.touched_outside(), 0) << "no_queries " << no_queries;
    int64_t nonzero = 0;
    const std::pair<TensorRef, const std::vector<int>*> grads[] = {
        {args.dq, &buf.cu_q}, {args.dk, &buf.cu_k}, {args.dv, &buf.cu_k}};
    for (const auto& [t, cu] : grads) {
      const std::vector<double> h = to_host(t);
      const int64_t row = t.shape[2] * t.shape[3];
      for (int64_t e = int64_t(cu->front()) * row; e < int64_t(cu->back()) * row; ++e) nonzero += !(h[e] == 0.0);
    }
    EXPECT_EQ(nonzero, 0) << "no_queries " << no_queries << ": rows inside sequences must be 0";
    // With zero_outside_rows the rows outside are zeroed as well: every gradient element is 0.
    BackwardArgs all = args;
    all.zero_outside_rows = true;
    buf.poison_grads(nullptr);
    ASSERT_TRUE(backward(all).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(buf.outside_not(0), 0) << "no_queries " << no_queries << ": zero_outside_rows";
  }
}

}  // namespace
}  // namespace flashattn::testing
