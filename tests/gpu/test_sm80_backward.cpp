// The sm80 backward (src/sm80/bwd) through the public API with the backend forced to sm80 (it
// runs on Hopper too): dq, dk, dv against the CPU fp64 backward under the correctness rule
// (bwd_check.h), gradients poisoned before every call, fresh random inputs with a nonzero mean.
// The grid covers every kernel head dim (64, 128, 256) and zero-filled ones between them, seqlens
// 1 to 4097 with Sq != Sk both ways (causal rows that see no key: dq 0, no NaN), GQA and MQA,
// strided dout and packed views; deterministic mode must be bitwise reproducible.
#include <string>
#include <vector>

#include "bwd_check.h"
#include "bwd_setup.h"
#include "deterministic_check.h"

using namespace flashattn;
using namespace flashattn::testing;

namespace {

constexpr DType kBf16 = DType::kBFloat16, kFp16 = DType::kFloat16;

std::vector<BwdShape> grid() {
  std::vector<BwdShape> cs;
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      const DType dt = causal ? kBf16 : kFp16;
      const DType other = causal ? kFp16 : kBf16;
      cs.push_back({1, 1, 1, 2, 2, d, causal, dt});
      cs.push_back({2, 17, 17, 4, 1, d, causal, other});    // MQA
      cs.push_back({1, 113, 1000, 8, 2, d, causal, dt});    // Sq < Sk, GQA 4
      cs.push_back({1, 1000, 113, 8, 1, d, causal, other});  // Sq > Sk: causal rows without keys, MQA
      cs.push_back({2, 300, 517, 8, 1, d, causal, dt, false, false, true});  // GQA 8, strided dout
    }
  for (bool causal : {false, true}) {
    cs.push_back({1, 1, 17, 4, 4, 128, causal, kBf16});    // one row
    cs.push_back({1, 17, 1, 4, 4, 64, causal, kFp16});     // one key
    cs.push_back({1, 1, 4097, 8, 1, 128, causal, kBf16});  // decode-like, MQA
    cs.push_back({2, 1000, 1000, 16, 2, 128, causal, kFp16});  // GQA 8
    cs.push_back({4, 256, 256, 4, 1, 64, causal, kBf16});      // batch, MQA
  }
  // 4097: a partial last block of one row / key at every block size.
  cs.push_back({1, 4097, 4097, 2, 2, 128, false, kBf16});
  cs.push_back({1, 4097, 4097, 4, 1, 64, true, kFp16});
  cs.push_back({1, 4097, 1000, 2, 2, 256, true, kBf16});  // Sq > Sk: 3097 rows without keys
  cs.push_back({1, 1000, 4097, 4, 2, 64, true, kFp16});   // Sq < Sk
  // Views: packed q/k/v, packed gradients, all with strided dout.
  cs.push_back({2, 777, 777, 4, 4, 64, true, kBf16, true});
  cs.push_back({1, 513, 513, 4, 4, 128, false, kFp16, true, true, true});
  // Zero-filled columns on the covering kernel (96 and 40 of 128 and 64; 200 of 256), and v's
  // head dim differing from q/k's.
  for (bool causal : {false, true}) {
    cs.push_back({2, 300, 517, 6, 2, 96, causal, kBf16});
    cs.push_back({2, 517, 300, 6, 2, 40, causal, kFp16});
    cs.push_back({1, 300, 300, 4, 2, 200, causal, kBf16, false, false, true});
    cs.push_back({1, 1000, 113, 4, 4, 192, causal, kFp16, false, false, true, 128});
    cs.push_back({2, 300, 517, 6, 2, 64, causal, kBf16, false, false, false, 128});
    cs.push_back({2, 300, 517, 6, 2, 40, causal, kFp16, false, false, false, 24});
  }
  return cs;
}

// GQA and causal among them, so the ordered dQ additions of several key blocks and several
// query heads of a group are exercised.
std::vector<BwdShape> deterministic_shapes() {
  return {{2, 1000, 1000, 8, 2, 128, true, kBf16},
          {1, 4097, 4097, 4, 1, 64, false, kFp16},
          {3, 517, 300, 8, 8, 96, false, kBf16},
          {2, 113, 1000, 16, 2, 256, true, kFp16},
          {1, 1000, 113, 4, 1, 64, true, kBf16},
          {1, 777, 777, 4, 4, 128, true, kBf16, true, true}};
}

std::string test_name(const ::testing::TestParamInfo<BwdShape>& info) { return name(info.param); }

uint64_t seed_of(const BwdShape& c) {
  return 7000003ull * c.sq + 1013ull * c.sk + 37ull * c.d + c.hq + (c.causal ? 11 : 0);
}

class Sm80BackwardGrid : public ::testing::TestWithParam<BwdShape> {};
class Sm80BackwardDeterministic : public ::testing::TestWithParam<BwdShape> {};

// The sm80 backend must serve every shape here (forced: a refusal is a failure, not a skip),
// except where the library is built without it.
#define RESOLVE_SM80(args)                                                             \
  do {                                                                                 \
    Backend chosen_ = Backend::kAuto;                                                  \
    const Status rs_ = resolve_backend(args, &chosen_);                                \
    if (rs_.code() == StatusCode::kNotSupported && rs_.message().find("not built") != std::string::npos) \
      GTEST_SKIP() << rs_.message();                                                   \
    ASSERT_TRUE(rs_.ok()) << rs_.message();                                            \
    ASSERT_EQ(chosen_, Backend::kSm80);                                                \
  } while (0)

}  // namespace

TEST_P(Sm80BackwardGrid, MatchesFp64) {
  FLASHATTN_REQUIRE_GPU();
  const BwdShape& c = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(Backend::kSm80, /*deterministic=*/false);
  RESOLVE_SM80(args);
  buf.fill(seed_of(c), nullptr);
  Backend fwd = Backend::kAuto;
  const Status fs = buf.forward(Backend::kSm80, nullptr, &fwd);
  ASSERT_TRUE(fs.ok()) << "forward (" << backend_name(fwd) << "): " << fs.message();
  buf.poison_grads(nullptr);
  const Status s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const BwdReport r = check_backward(args);
  EXPECT_TRUE(r.pass) << "forward " << backend_name(fwd) << ": " << r.message;
}

TEST_P(Sm80BackwardDeterministic, BitwiseAcrossRunsAndStreams) {
  FLASHATTN_REQUIRE_GPU();
  const BwdShape& c = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(Backend::kSm80, /*deterministic=*/true);
  RESOLVE_SM80(args);
  buf.fill(seed_of(c) + 5, nullptr);
  Backend fwd = Backend::kAuto;
  ASSERT_TRUE(buf.forward(Backend::kSm80, nullptr, &fwd).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_bitwise_deterministic(
      {/*runs=*/10, /*side_runs=*/3}, "", [&](cudaStream_t st) { buf.poison_grads(st); },
      [&](cudaStream_t st) { return backward(args, st); }, [&] { return buf.grad_bytes(); },
      [&]() -> ::testing::AssertionResult {
        // Deterministic mode must still be right (its own check, the cheapest budget that checks a group).
        const BwdReport r = check_backward(args, /*budget=*/1);
        if (r.pass) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << r.message;
      });
}

INSTANTIATE_TEST_SUITE_P(Sm80, Sm80BackwardGrid, ::testing::ValuesIn(grid()), test_name);
INSTANTIATE_TEST_SUITE_P(Sm80, Sm80BackwardDeterministic, ::testing::ValuesIn(deterministic_shapes()), test_name);
