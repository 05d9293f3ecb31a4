// The sm80 backward's small-shared-memory tier (sm80/bwd/select.h: kSm80BwdD{64,128,256}Small,
// the kernels sm86 / sm89 parts run) forced on whatever device runs the tests, through
// detail::sm80_backward_for_smem with sm86's opt-in limit: dq, dk, dv against the CPU fp64
// backward under the correctness rule (bwd_check.h), as test_sm80_backward.cpp checks the full
// tier. Every small plain kernel (D 64 / 128 / 256, causal and not, fp16 and bf16) with GQA / MQA,
// Sq != Sk both ways, partial last blocks, zero-filled head dims, and deterministic mode. The
// small tier's feature and varlen kernels: test_backward_features.cpp, test_varlen_backward*.cpp.
#include <string>
#include <vector>

#include "bwd_check.h"
#include "bwd_setup.h"
#include "deterministic_check.h"
#include "small_tier.h"

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
      cs.push_back({2, 17, 17, 4, 1, d, causal, other});     // MQA
      cs.push_back({1, 113, 1000, 8, 2, d, causal, dt});     // Sq < Sk, GQA 4
      cs.push_back({1, 1000, 113, 8, 1, d, causal, other});  // Sq > Sk: causal rows without keys, MQA
      cs.push_back({2, 300, 517, 8, 1, d, causal, dt, false, false, true});  // GQA 8, strided dout
      cs.push_back({1, 1000, 1000, 4, 2, d, causal, other});                 // GQA 2, many blocks
    }
  // A partial last block of one row / key at every block size; zero-filled columns on the
  // covering kernel, and v's head dim differing from q/k's.
  for (bool causal : {false, true}) {
    cs.push_back({1, 4097, 4097, 2, 1, 64, causal, kBf16});
    cs.push_back({1, 1000, 4097, 2, 2, 128, causal, kFp16});
    cs.push_back({1, 4097, 1000, 2, 2, 256, causal, kBf16});
    cs.push_back({2, 300, 517, 6, 2, 96, causal, kBf16});
    cs.push_back({2, 517, 300, 6, 2, 40, causal, kFp16});
    cs.push_back({1, 300, 300, 4, 2, 200, causal, kBf16, false, false, true});
    cs.push_back({1, 1000, 113, 4, 4, 192, causal, kFp16, false, false, true, 128});
  }
  cs.push_back({2, 777, 777, 4, 4, 64, true, kBf16, true, true, true});  // packed views
  return cs;
}

std::vector<BwdShape> deterministic_shapes() {
  return {{2, 1000, 1000, 8, 2, 64, true, kBf16},
          {1, 517, 1000, 4, 1, 128, false, kFp16},
          {2, 113, 1000, 16, 2, 256, true, kFp16},
          {1, 1000, 113, 4, 1, 256, false, kBf16}};
}

std::string test_name(const ::testing::TestParamInfo<BwdShape>& info) { return name(info.param); }

uint64_t seed_of(const BwdShape& c) {
  return 7000003ull * c.sq + 1013ull * c.sk + 37ull * c.d + c.hq + (c.causal ? 11 : 0) + 5;
}

class Sm80BackwardSmallGrid : public ::testing::TestWithParam<BwdShape> {};
class Sm80BackwardSmallDeterministic : public ::testing::TestWithParam<BwdShape> {};

}  // namespace

TEST_P(Sm80BackwardSmallGrid, MatchesFp64) {
  REQUIRE_SMALL_TIER();
  const BwdShape& c = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(Backend::kSm80, /*deterministic=*/false);
  buf.fill(seed_of(c), nullptr);
  Backend fwd = Backend::kAuto;
  const Status fs = buf.forward(Backend::kSm80, nullptr, &fwd);
  ASSERT_TRUE(fs.ok()) << "forward (" << backend_name(fwd) << "): " << fs.message();
  buf.poison_grads(nullptr);
  const Status s = small_tier_backward(args, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const BwdReport r = check_backward(args);
  EXPECT_TRUE(r.pass) << "forward " << backend_name(fwd) << ": " << r.message;
}

TEST_P(Sm80BackwardSmallDeterministic, BitwiseAcrossRunsAndStreams) {
  REQUIRE_SMALL_TIER();
  const BwdShape& c = GetParam();
  BwdBuffers buf(c);
  const BackwardArgs args = buf.args(Backend::kSm80, /*deterministic=*/true);
  buf.fill(seed_of(c) + 5, nullptr);
  Backend fwd = Backend::kAuto;
  ASSERT_TRUE(buf.forward(Backend::kSm80, nullptr, &fwd).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_bitwise_deterministic(
      {/*runs=*/10, /*side_runs=*/3}, "", [&](cudaStream_t st) { buf.poison_grads(st); },
      [&](cudaStream_t st) { return small_tier_backward(args, st); }, [&] { return buf.grad_bytes(); },
      [&]() -> ::testing::AssertionResult {
        const BwdReport r = check_backward(args, /*budget=*/1);
        if (r.pass) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << r.message;
      });
}

INSTANTIATE_TEST_SUITE_P(Sm80Small, Sm80BackwardSmallGrid, ::testing::ValuesIn(grid()), test_name);
INSTANTIATE_TEST_SUITE_P(Sm80Small, Sm80BackwardSmallDeterministic, ::testing::ValuesIn(deterministic_shapes()),
                         test_name);
