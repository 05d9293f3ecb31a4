// Deterministic mode's property, as the backward tests check it: run after run, and on a second
// stream, the gradients are bitwise those of the first run. Each run first poisons dq/dk/dv
// with NaN (a run that skipped an element would keep a NaN there), then calls the backward and
// synchronises; the first run's gradients must also pass the test's own check.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace flashattn::testing {

struct DeterministicRuns {
  int runs = 0;       // on the default stream, the first included
  int side_runs = 0;  // then on a second, non-blocking stream (0: none)
};

// poison(stream): NaN into dq, dk, dv on `stream`. run(stream) -> Status: one backward call on
// `stream`. grad_bytes() -> std::vector<uint8_t>: dq, dk, dv as bytes. check_first() ->
// ::testing::AssertionResult: the first run's gradients. `who` prefixes the messages.
// Fatal failures return from here only: call it last in a test, or under ASSERT_NO_FATAL_FAILURE.
template <class Poison, class Run, class GradBytes, class CheckFirst>
void expect_bitwise_deterministic(const DeterministicRuns& n, const std::string& who, Poison&& poison, Run&& run,
                                  GradBytes&& grad_bytes, CheckFirst&& check_first) {
  std::vector<uint8_t> first;
  for (int r = 0; r < n.runs; ++r) {
    poison(cudaStream_t{nullptr});
    const Status s = run(cudaStream_t{nullptr});
    ASSERT_TRUE(s.ok()) << who << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (r == 0) {
      first = grad_bytes();
      ASSERT_TRUE(check_first());
      continue;
    }
    ASSERT_TRUE(grad_bytes() == first) << who << "run " << r << " differs from run 0";
  }
  if (n.side_runs == 0) return;
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  for (int r = 0; r < n.side_runs; ++r) {
    poison(side);
    const Status s = run(side);
    ASSERT_TRUE(s.ok()) << who << s.message();
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    EXPECT_TRUE(grad_bytes() == first) << who << "run " << r << " on a second stream differs";
  }
  cudaStreamDestroy(side);
}

}  // namespace flashattn::testing
