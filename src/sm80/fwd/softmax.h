// Online softmax of the sm80 forward kernel, on the mma C-fragment layout: in m tile mt a lane
// holds rows lane/4 (elements 0,1) and lane/4+8 (elements 2,3) of every n8 tile; a row is
// spread over the 4 lanes of a quad. Row statistics live in the log2 domain.
#pragma once

#include <cmath>
#include <cstdint>

#include "arch/convert.h"
#include "arch/fast_math.h"

namespace flashattn::sm80 {

template <class Cfg>
struct OnlineSoftmax {
  static constexpr int kMT = Cfg::kMTiles;
  // Per (mt, half): running max of the scores (raw when folded, pre-scaled by scale_log2 when
  // not) and this lane's partial row sum of probabilities.
  float row_max[kMT][2];
  float row_sum[kMT][2];

  __device__ __forceinline__ OnlineSoftmax() {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[mt][h] = -INFINITY;
        row_sum[mt][h] = 0.f;
      }
  }

  __device__ __forceinline__ static float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  }
  __device__ __forceinline__ static float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
  }

  // max(m, row (mt, h) of rS over the quad): the row's new running max before any lazy test.
  template <int kNS>
  __device__ __forceinline__ static float tile_row_max(const float (&rS)[kMT][kNS][4], int mt, int h, float m) {
#pragma unroll
    for (int nt = 0; nt < kNS; ++nt) m = fmaxf(m, fmaxf(rS[mt][nt][2 * h], rS[mt][nt][2 * h + 1]));
    return quad_max(m);
  }

  // Unfolded configurations scale every score first (FMUL), then take exp2(s - m) (FADD + MUFU);
  // folded ones fold the scale into exp2's FFMA (nothing to do here).
  template <int kNS>
  __device__ __forceinline__ static void scale_unfolded(float (&rS)[kMT][kNS][4], float scale_log2) {
    if constexpr (!Cfg::kFoldedExp2) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) rS[mt][nt][e] = __fmul_rn(rS[mt][nt][e], scale_log2);
    }
  }

  // Turns scores rS into unnormalized probabilities, rescaling rO and the sums to the new max.
  template <int kNS, int kNO>
  __device__ __forceinline__ void step(float (&rS)[kMT][kNS][4], float (&rO)[kMT][kNO][4], float scale_log2) {
    scale_unfolded(rS, scale_log2);
    if constexpr (Cfg::kLazyRescale) {
      step_lazy(rS, rO, scale_log2);
    } else {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float mx = tile_row_max(rS, mt, h, row_max[mt][h]);
          const float m_sub = exp2_offset(mx, scale_log2);
          const float alpha = rescale_factor(row_max[mt][h], m_sub, scale_log2);
          row_max[mt][h] = mx;
          const float sum = exp_and_sum(rS, mt, h, m_sub, scale_log2);
          row_sum[mt][h] = row_sum[mt][h] * alpha + sum;
          scale_o_row(rO, mt, h, alpha);
        }
      }
    }
  }

  // step() for scores known to be at most 1 (softcap's tanh, no ALiBi): the bound serves as the
  // max of every row and step, so no max is reduced and O is never rescaled. The caller
  // guarantees that the smallest exp2 argument, -2 * scale_log2, keeps P normal in fp32 and bf16
  // (AttnParams::softcap_bounds_max).
  template <int kNS>
  __device__ __forceinline__ void step_bounded(float (&rS)[kMT][kNS][4], float scale_log2) {
    scale_unfolded(rS, scale_log2);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[mt][h] = Cfg::kFoldedExp2 ? 1.f : scale_log2;  // the bound, in row_max's units
        // exp2_offset of the bound; P is bf16 here and the sum takes it as rounded (sm90's
        // step_bounded says why)
        row_sum[mt][h] += exp_and_sum<kNS, FLASHATTN_ABL_BOUNDED_ROUNDED_SUM != 0>(rS, mt, h, scale_log2, scale_log2);
      }
    }
  }

  // LazyRescale: the running max only moves when some row of the warp would otherwise see
  // probabilities above 2^kLazyMaxLog2 (a warp-uniform branch); usually none does, so the
  // kMT*kNO*4 FMULs of rO and the alpha MUFUs are skipped. Exact in real arithmetic: P, the row
  // sums and O all stay relative to the same (stale) max, which finalize uses for the LSE; P <=
  // 2^8 is exact enough in bf16/fp16 (same relative precision) and far from overflow in fp32.
  static constexpr float kLazyMaxLog2 = 8.f;
  template <int kNS, int kNO>
  __device__ __forceinline__ void step_lazy(float (&rS)[kMT][kNS][4], float (&rO)[kMT][kNO][4], float scale_log2) {
    float mx[kMT][2];
    bool grow = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[mt][h] = tile_row_max(rS, mt, h, row_max[mt][h]);
        grow |= grows(mx[mt][h], row_max[mt][h], scale_log2);
      }
    }
    lazy_apply(mx, grow, rS, rO, scale_log2);
  }

  // Whether new max m_new moves a row past the lazy bound (log2 domain; -inf - -inf, nothing
  // visible yet, is NaN and compares false).
  __device__ __forceinline__ static bool grows(float m_new, float m_old, float scale_log2) {
    const float d = Cfg::kFoldedExp2 ? (m_new - m_old) * scale_log2 : m_new - m_old;
    return d > kLazyMaxLog2;
  }

  // step_lazy once the rows' new maxima mx are known, grow: whether this lane's rows pass the
  // bound: rescale if any row of the warp does, then exponentiate.
  template <int kNS, int kNO>
  __device__ __forceinline__ void lazy_apply(const float (&mx)[kMT][2], bool grow, float (&rS)[kMT][kNS][4],
                                             float (&rO)[kMT][kNO][4], float scale_log2) {
    if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float m_new = mx[mt][h];
          const float alpha = rescale_factor(row_max[mt][h], exp2_offset(m_new, scale_log2), scale_log2);
          row_max[mt][h] = m_new;
          row_sum[mt][h] *= alpha;
          scale_o_row(rO, mt, h, alpha);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_sum[mt][h] += exp_and_sum(rS, mt, h, exp2_offset(row_max[mt][h], scale_log2), scale_log2);
      }
    }
  }

  // step() of the o_col_split configurations (fwd/col_split.h): each warp of a pair holds half
  // of a row's keys, so the row maxima are the pair's (both warps then take the same lazy
  // decision and write P relative to the same max). Lazy rescaling only: the pair's maxima are
  // exchanged once per block either way, and the tuner measures only the default.
  template <class Pair, int kNS, int kNO>
  __device__ __forceinline__ void step_pair(float (&rS)[kMT][kNS][4], float (&rO)[kMT][kNO][4], float scale_log2,
                                            const Pair& pair) {
    static_assert(Cfg::kLazyRescale, "o_col_split takes the lazy rescale");
    scale_unfolded(rS, scale_log2);
    float mx[kMT][2];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) mx[mt][h] = tile_row_max(rS, mt, h, row_max[mt][h]);
    }
    pair.max_rows(mx);
    bool grow = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) grow |= grows(mx[mt][h], row_max[mt][h], scale_log2);
    }
    lazy_apply(mx, grow, rS, rO, scale_log2);
  }

  // What exp2's argument subtracts for row max m (times scale_log2 when folded). A row with no
  // visible key yet keeps max -inf but subtracts 0, so exp2(-inf - 0) = 0 rather than NaN.
  __device__ __forceinline__ static float exp2_offset(float m, float scale_log2) {
    return m == -INFINITY ? 0.f : (Cfg::kFoldedExp2 ? m * scale_log2 : m);
  }
  // Factor that moves sums and O from the old row max to the new one (m_sub: exp2_offset of it).
  __device__ __forceinline__ static float rescale_factor(float old_max, float m_sub, float scale_log2) {
    if constexpr (Cfg::kFoldedExp2) return arch::ex2_approx_ftz(fmaf(old_max, scale_log2, -m_sub));
    return arch::ex2_approx_ftz(__fsub_rn(old_max, m_sub));
  }
  template <int kNO>
  __device__ __forceinline__ static void scale_o_row(float (&rO)[kMT][kNO][4], int mt, int h, float alpha) {
#pragma unroll
    for (int nt = 0; nt < kNO; ++nt) {
      rO[mt][nt][2 * h] *= alpha;
      rO[mt][nt][2 * h + 1] *= alpha;
    }
  }

  // rS[mt][*][2h..2h+1] <- exp2(score - m_sub) (scaled by scale_log2 first when folded); returns
  // this lane's sum of them.
  // kRoundedSum (step_bounded, bf16): the sum takes each pair as rounded for the PV mma.
  template <int kNS, bool kRoundedSum = false>
  __device__ __forceinline__ static float exp_and_sum(float (&rS)[kMT][kNS][4], int mt, int h, float m_sub,
                                                      float scale_log2) {
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNS; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float& s = rS[mt][nt][2 * h + j];
        if constexpr (Cfg::kFoldedExp2) {
          s = arch::ex2_approx_ftz(fmaf(s, scale_log2, -m_sub));
        } else {
          s = arch::ex2_approx_ftz(__fsub_rn(s, m_sub));
        }
        if constexpr (!kRoundedSum) sum += s;
      }
      if constexpr (kRoundedSum) sum += arch::sum_as_bf16_pair(rS[mt][nt][2 * h], rS[mt][nt][2 * h + 1]);
    }
    return sum;
  }

  // Final per-row normalizers: 1/l (0 for empty rows) and the natural-log LSE (-inf when empty).
  __device__ __forceinline__ void finalize(float (&inv)[kMT][2], float (&lse)[kMT][2], float scale_log2) const {
    constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float l = quad_sum(row_sum[mt][h]);
        const float m = row_max[mt][h];
        const float m2 = Cfg::kFoldedExp2 ? m * scale_log2 : m;
        const bool empty = l == 0.f || m == -INFINITY;
        inv[mt][h] = empty ? 0.f : 1.f / l;
        lse[mt][h] = empty ? -INFINITY : (m2 + log2f(l)) * kLn2;
      }
    }
  }
};

}  // namespace flashattn::sm80
