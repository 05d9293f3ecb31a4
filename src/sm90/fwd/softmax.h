// Online softmax over one consumer warpgroup's S fragment (m64 x BlockN, f32 accumulator layout).
// Thread (w, g, q) holds rows r0 = 16w+g and r1 = r0+8; element i belongs to row ((i>>1)&1)
// and column 8*(i>>2) + 2q + (i&1). A row is spread over the 4 threads of a quad.
#pragma once

#include <cmath>

#include "arch/convert.h"
#include "arch/fast_math.h"
#include "sm90/mask.h"

namespace flashattn::sm90 {

// kPolyEvery > 0: the exp2 of registers i with i % kPolyEvery == 0 (1 in kPolyEvery, the same
// ones every step) runs on the FMA pipe (arch::ex2_poly), the rest on MUFU.EX2 (config.h,
// kSoftcapPolyExp2Every).
template <int kSRegs, bool kLazyRescale = false, int kPolyEvery = 0>
struct OnlineSoftmax {
  static_assert(kPolyEvery >= 0);
  // Whether register i's exp2 runs on the FMA pipe (resolved at compile time: i is an unrolled
  // register index).
  static constexpr bool on_fma_pipe(int i) { return kPolyEvery > 0 && i % (kPolyEvery > 0 ? kPolyEvery : 1) == 0; }
  // Running row max, already multiplied by scale*log2(e) (the exp2 domain). -inf: nothing seen.
  float row_max[2] = {-INFINITY, -INFINITY};
  // Per-thread partial row sums; reduced over the quad only once, in finalize().
  float row_sum[2] = {0.f, 0.f};

  // S <- exp2(S*scale_log2 - max) in place; returns in alpha the factor the running O must be
  // multiplied by (0 while the row had no visible key yet). Returns whether either of this
  // thread's rows changed its max (alpha != 1); always true without lazy rescaling. The four
  // threads of a quad agree (the max is quad-reduced).
  // kLazyRescale: the max is raised only if the tile's max exceeds it by more than kThreshold,
  // so every exp2 argument is <= kThreshold (P <= 2^kThreshold) and a row that keeps its max has
  // alpha exactly 1.
  template <float kThreshold = 8.f>
  __device__ __forceinline__ bool step(float (&s)[kSRegs], float scale_log2, float (&alpha)[2]) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kSRegs; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
    float off[2];
    bool moved = !kLazyRescale;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float cand = fmaxf(row_max[r], mx[r] * scale_log2);
      if constexpr (kLazyRescale) {
        // -inf -> finite: +inf > threshold (raise); -inf -> -inf: NaN compares false (keep).
        const bool raise = cand - row_max[r] > kThreshold;
        const float new_max = raise ? cand : row_max[r];
        off[r] = new_max == -INFINITY ? 0.f : new_max;
        alpha[r] = raise ? arch::ex2_approx_ftz(row_max[r] - off[r]) : 1.f;
        row_max[r] = new_max;
        moved = moved || raise;
      } else {
        // A row with no visible key so far keeps max -inf; subtract 0 so exp2(-inf) = 0, not NaN.
        off[r] = cand == -INFINITY ? 0.f : cand;
        alpha[r] = arch::ex2_approx_ftz(row_max[r] - off[r]);
        row_max[r] = cand;
      }
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kSRegs; ++i) {
      const int r = (i >> 1) & 1;
      // One FFMA + one MUFU per score (the scale is folded into the exponent), or the FFMA and
      // ex2_poly's FMA/ALU instructions for the registers on the FMA pipe.
      const float x = fmaf(s[i], scale_log2, -off[r]);
      s[i] = on_fma_pipe(i) ? arch::ex2_poly(x) : arch::ex2_approx_ftz(x);
      sum[r] += s[i];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * alpha[r] + sum[r];
    return moved;
  }

  // step() for scores known to be at most 1 (softcap's tanh, before any ALiBi bias): 1 *
  // scale_log2 bounds every exp2 argument, so it serves as the max of every step (no max
  // reduction, alpha always 1: O is never rescaled). The caller guarantees that the smallest
  // argument, -2 * scale_log2, keeps P normal in fp32 and bf16 (AttnParams::softcap_bounds_max).
  // P is bf16 here (the caller's condition), and the sums take it as rounded for PV: a row's
  // largest P is no longer exactly 1, and O would otherwise carry that P's rounding error whole
  // wherever one key dominates (arch/convert.h FLASHATTN_ABL_BOUNDED_ROUNDED_SUM).
  __device__ __forceinline__ void step_bounded(float (&s)[kSRegs], float scale_log2) {
    float sum[2] = {0.f, 0.f};
    constexpr bool kRounded = FLASHATTN_ABL_BOUNDED_ROUNDED_SUM != 0;
#pragma unroll
    for (int i = 0; i < kSRegs; i += 2) {  // (i, i + 1): one row, the pair convert_p packs
#pragma unroll
      for (int j = i; j < i + 2; ++j) {
        const float x = fmaf(s[j], scale_log2, -scale_log2);
        s[j] = on_fma_pipe(j) ? arch::ex2_poly(x) : arch::ex2_approx_ftz(x);
        if constexpr (!kRounded) sum[(j >> 1) & 1] += s[j];
      }
      if constexpr (kRounded) sum[(i >> 1) & 1] += arch::sum_as_bf16_pair(s[i], s[i + 1]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = scale_log2;
      row_sum[r] += sum[r];
    }
  }

  // Quad-reduces the sums; returns 1/sum per row (0 for a fully masked row) and the natural-log
  // LSE (-inf for a fully masked row).
  __device__ __forceinline__ void finalize(float (&inv_sum)[2], float (&lse)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float s = row_sum[r];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      const bool empty = !(s > 0.f);
      inv_sum[r] = empty ? 0.f : 1.f / s;
      lse[r] = empty ? -INFINITY : (row_max[r] + __log2f(s)) * 0.69314718055994531f;
    }
  }
};

}  // namespace flashattn::sm90
