// How many key splits a KV-cache call gets when the caller leaves num_splits at 0. Plain C++
// (host-only, no CUDA): the test checks it without a GPU.
#pragma once

#include <cstdint>

namespace flashattn::decode {

constexpr int kMaxSplits = 128;        // the combine kernel's per-row weight buffer
constexpr int kMinBlocksPerSplit = 2;  // below that a split's fixed costs (Q, merge, partial O) dominate

// ctas: CTAs of one split (b * hkv * m_tiles); slots: CTAs the device holds at once (SMs x
// resident CTAs per SM); n_blocks: key blocks of the longest possible sequence.
// Decode is memory-bound, so the goal is to keep every slot streaming until the end: with w =
// ctas * s / slots waves, the last wave is w / ceil(w) full. Among s in [1, max] take the
// smallest whose efficiency is within 5% of the best (FlashAttention 2's rule, over CTA slots
// rather than SMs since several of our CTAs share an SM, and tighter than its 15%: on an H200,
// D=64, B=64, Hkv=8 (512 CTAs, 396 slots) 2 splits (0.86) ran at 3.77 TB/s and 4 at 4.06, while
// 1 split where it is 0.97 efficient (D=128, 264 slots) beat 2 and 4): fewer splits, less
// combine traffic.
inline int choose_num_splits(int64_t ctas, int64_t slots, int64_t n_blocks) {
  if (ctas <= 0 || slots <= 0) return 1;
  int64_t max_s = n_blocks / kMinBlocksPerSplit;
  if (max_s > kMaxSplits) max_s = kMaxSplits;
  if (max_s <= 1) return 1;
  auto efficiency = [&](int64_t s) {
    const double waves = double(ctas * s) / double(slots);
    const double full = double(int64_t(waves) + (double(int64_t(waves)) < waves ? 1 : 0));
    return waves / full;
  };
  double best = 0.0;
  for (int64_t s = 1; s <= max_s; ++s) {
    const double e = efficiency(s);
    if (e > best) best = e;
  }
  for (int64_t s = 1; s <= max_s; ++s)
    if (efficiency(s) >= 0.95 * best) return static_cast<int>(s);
  return 1;
}

}  // namespace flashattn::decode
