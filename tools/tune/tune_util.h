// Timing shared by the modes of flashattn-sm80-tune (sm80_tune.cpp, bwd_tune.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
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

// --match: whether a candidate's name without its dtype suffix (`base`) is wanted, i.e. contains
// one of `match`'s strings, or ends with one given as "x$".
inline bool name_matches(const std::string& base, const std::vector<std::string>& match) {
  for (const std::string& m : match) {
    const bool at_end = !m.empty() && m.back() == '$';
    const std::string t = at_end ? m.substr(0, m.size() - 1) : m;
    if (at_end ? base.size() >= t.size() && base.compare(base.size() - t.size(), t.size(), t) == 0
               : base.find(t) != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace flashattn::tune
