// Timing shared by the modes of flashattn-sm80-tune (sm80_tune.cpp, bwd_tune.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

namespace flashattn::tune {

// Median milliseconds of `fn` over `iters` launches after `warmup` (CUDA events on the default
// stream).
template <class F>
double time_ms(F&& fn, int warmup = 3, int iters = 10) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<cudaEvent_t> ev(iters + 1);
  for (auto& e : ev) cudaEventCreate(&e);
  cudaEventRecord(ev[0]);
  for (int i = 0; i < iters; ++i) {
    fn();
    cudaEventRecord(ev[i + 1]);
  }
  cudaEventSynchronize(ev[iters]);
  std::vector<float> t(iters);
  for (int i = 0; i < iters; ++i) cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]);
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[iters / 2];
}

}  // namespace flashattn::tune
