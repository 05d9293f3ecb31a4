// The backward through the public API, per backend: dq, dk, dv against the CPU fp64 backward
// under the correctness rule (bwd_check.h) over the awkward grid (seqlens 1..4097, Sq != Sk both
// ways under causal, GQA/MQA, every head dim, packed and strided views), gradients poisoned
// before every call; bitwise reproducibility of deterministic mode over repeated runs and a
// second stream; empty problems zero-fill what has elements. A backend that cannot serve a case
// (resolve_backend answers not-supported) skips it with the reason.
#include <string>
#include <tuple>
#include <vector>

#include "bwd_check.h"
#include "bwd_setup.h"
#include "deterministic_check.h"

using namespace flashattn;
using namespace flashattn::testing;

namespace flashattn::testing {
void PrintTo(const BwdShape& c, std::ostream* os) { *os << name(c); }
}  // namespace flashattn::testing

namespace {

constexpr DType kBf16 = DType::kBFloat16, kFp16 = DType::kFloat16;

std::vector<BwdShape> grid() {
  std::vector<BwdShape> cs;
  for (DType dt : {kBf16, kFp16})
    for (int d : {64, 96, 128, 192, 256})
      for (bool causal : {false, true}) {
        cs.push_back({1, 1, 1, 2, 2, d, causal, dt});
        cs.push_back({2, 17, 17, 4, 1, d, causal, dt});     // MQA
        cs.push_back({1, 113, 1000, 8, 2, d, causal, dt});  // Sq < Sk, GQA 4
        cs.push_back({1, 1000, 113, 8, 1, d, causal, dt});  // Sq > Sk: rows without keys, MQA
      }
  for (bool causal : {false, true}) {
    cs.push_back({1, 1, 17, 4, 4, 128, causal, kBf16});       // one row, all (or the last) keys
    cs.push_back({1, 17, 1, 4, 4, 128, causal, kFp16});       // one key: causal, only the last row
    cs.push_back({1, 1, 4097, 8, 1, 128, causal, kBf16});     // decode-like, MQA
    cs.push_back({1, 4097, 1, 4, 4, 64, causal, kFp16});
    cs.push_back({2, 1000, 1000, 16, 2, 128, causal, kBf16});  // GQA 8
    cs.push_back({1, 1000, 1000, 8, 1, 64, causal, kFp16});    // MQA over 8 heads
    cs.push_back({4, 256, 256, 4, 1, 128, causal, kBf16});     // batch
  }
  // 4097: past every block size, with a partial last block of 1 row/key.
  cs.push_back({1, 4097, 4097, 2, 2, 128, false, kBf16});
  cs.push_back({1, 4097, 4097, 4, 1, 64, true, kFp16});
  cs.push_back({1, 4097, 4097, 2, 2, 256, true, kBf16});
  cs.push_back({1, 4097, 4097, 2, 1, 96, false, kFp16});
  cs.push_back({1, 4097, 1000, 4, 2, 192, true, kBf16});  // Sq > Sk: 3097 rows without keys
  cs.push_back({1, 1000, 4097, 4, 2, 64, true, kFp16});   // Sq < Sk
  // Views: packed q/k/v, packed gradients, dout as half of a wider buffer, and all at once.
  for (int d : {64, 128, 256}) {
    cs.push_back({2, 777, 777, 4, 4, d, true, kBf16, true});
    cs.push_back({1, 1000, 1000, 4, 4, d, false, kFp16, true, true});
    cs.push_back({2, 113, 113, 8, 8, d, true, kBf16, false, true});
    cs.push_back({2, 300, 517, 6, 2, d, d == 128, kFp16, false, false, true});
  }
  cs.push_back({1, 513, 513, 4, 4, 96, true, kFp16, true, true, true});
  cs.push_back({1, 513, 513, 4, 4, 192, false, kBf16, true, true, true});
  // Head dims between the instantiated ones (zero-filled columns on a covering kernel), and
  // v's head dim differing from q/k's; strided dout among them.
  for (int d : {8, 40, 80, 112})
    for (bool causal : {false, true}) cs.push_back({2, 300, 517, 6, 2, d, causal, causal ? kBf16 : kFp16});
  for (auto [d, dv] : {std::pair{192, 128}, {64, 128}, {128, 64}, {40, 24}, {96, 64}})
    for (bool causal : {false, true}) {
      cs.push_back({2, 300, 517, 6, 2, d, causal, kBf16, false, false, false, dv});
      cs.push_back({1, 1000, 113, 4, 4, d, causal, kFp16, false, false, true, dv});  // rows without keys
    }
  return cs;
}

// Deterministic mode: GQA and causal among them, so a reduction over query heads or a partial
// causal block is exercised.
std::vector<BwdShape> deterministic_shapes() {
  return {{2, 1000, 1000, 8, 2, 128, true, kBf16},
          {1, 4097, 4097, 4, 1, 64, false, kFp16},
          {3, 517, 300, 8, 8, 96, false, kBf16},
          {2, 113, 1000, 16, 2, 256, true, kFp16},
          {1, 777, 777, 4, 4, 128, true, kBf16, true, true},
          {2, 517, 300, 8, 2, 96, true, kBf16, false, false, false, 64}};
}

std::vector<BwdShape> empty_shapes() {
  return {{2, 0, 64, 4, 2, 128, false, kBf16},   // no query: dk, dv are 0
          {2, 0, 64, 4, 2, 64, true, kFp16},
          {2, 64, 0, 4, 2, 128, true, kBf16},   // no key: dq is 0
          {1, 64, 0, 8, 8, 256, false, kFp16}};
}

const auto kBackends = ::testing::Values(Backend::kReference, Backend::kSm90);

template <class Info>
std::string test_name(const Info& info) {
  return std::string(backend_name(std::get<0>(info.param))) + "_" + name(std::get<1>(info.param));
}

using Param = std::tuple<Backend, BwdShape>;
class BackwardGrid : public ::testing::TestWithParam<Param> {};
class BackwardDeterministic : public ::testing::TestWithParam<Param> {};
class BackwardEmpty : public ::testing::TestWithParam<Param> {};

uint64_t seed_of(const BwdShape& c) {
  return 1000003ull * c.sq + 1009ull * c.sk + 31ull * c.d + c.hq + (c.causal ? 7 : 0);
}

// All-zero as values (a -0.0 counts as zero; NaN does not).
int64_t nonzero_values(const TensorRef& t) {
  int64_t n = 0;
  for (double x : to_host(t)) n += !(x == 0.0);
  return n;
}

}  // namespace

// Backend::kReference is always served. Until the API lands, a not-supported answer skips.
#define RESOLVE_OR_SKIP(args, chosen)                                            \
  do {                                                                           \
    const Status rs_ = resolve_backend(args, &(chosen));                         \
    if (rs_.code() == StatusCode::kNotSupported) GTEST_SKIP() << rs_.message();  \
    ASSERT_TRUE(rs_.ok()) << rs_.message();                                      \
  } while (0)

TEST_P(BackwardGrid, MatchesFp64) {
  FLASHATTN_REQUIRE_GPU();
  const auto& [backend, c] = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(backend, /*deterministic=*/false);
  Backend chosen = Backend::kAuto;
  RESOLVE_OR_SKIP(args, chosen);
  buf.fill(seed_of(c), nullptr);
  Backend fwd = Backend::kAuto;
  const Status fs = buf.forward(backend, nullptr, &fwd);
  ASSERT_TRUE(fs.ok()) << "forward (" << backend_name(fwd) << "): " << fs.message();
  buf.poison_grads(nullptr);
  const Status s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const BwdReport r = check_backward(args);
  EXPECT_TRUE(r.pass) << backend_name(chosen) << " (forward " << backend_name(fwd)
                      << "): " << r.message;
}

TEST_P(BackwardDeterministic, BitwiseAcrossRunsAndStreams) {
  FLASHATTN_REQUIRE_GPU();
  const auto& [backend, c] = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(backend, /*deterministic=*/true);
  Backend chosen = Backend::kAuto;
  RESOLVE_OR_SKIP(args, chosen);
  buf.fill(seed_of(c) + 5, nullptr);
  Backend fwd = Backend::kAuto;
  ASSERT_TRUE(buf.forward(backend, nullptr, &fwd).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_bitwise_deterministic(
      {/*runs=*/20, /*side_runs=*/3}, std::string(backend_name(chosen)) + ": ",
      [&](cudaStream_t st) { buf.poison_grads(st); }, [&](cudaStream_t st) { return backward(args, st); },
      [&] { return buf.grad_bytes(); },
      [&]() -> ::testing::AssertionResult {
        // Values are the grid's business; here only that the reference bits are all written.
        const BwdReport r = check_backward(args, /*budget=*/0);
        if (r.pass) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << r.message;
      });
}

TEST_P(BackwardEmpty, ZeroFillsGradients) {
  FLASHATTN_REQUIRE_GPU();
  const auto& [backend, c] = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(backend, /*deterministic=*/false);
  Backend chosen = Backend::kAuto;
  // An empty call may resolve to any backend or to none; only its result is specified.
  const Status rs = resolve_backend(args, &chosen);
  if (rs.code() == StatusCode::kNotSupported) GTEST_SKIP() << rs.message();
  buf.fill(seed_of(c), nullptr);
  buf.poison_grads(nullptr);
  const Status s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(nonzero_values(buf.dq), 0) << "dq";
  EXPECT_EQ(nonzero_values(buf.dk), 0) << "dk";
  EXPECT_EQ(nonzero_values(buf.dv), 0) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Grid, BackwardGrid, ::testing::Combine(kBackends, ::testing::ValuesIn(grid())),
                         [](const auto& info) { return test_name(info); });
INSTANTIATE_TEST_SUITE_P(Repeat, BackwardDeterministic,
                         ::testing::Combine(kBackends, ::testing::ValuesIn(deterministic_shapes())),
                         [](const auto& info) { return test_name(info); });
INSTANTIATE_TEST_SUITE_P(Empty, BackwardEmpty,
                         ::testing::Combine(kBackends, ::testing::ValuesIn(empty_shapes())),
                         [](const auto& info) { return test_name(info); });
