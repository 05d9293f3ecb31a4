// fp64 model of the kernels' tiled online softmax. It follows the kernel's order of work,
// so a disagreement with attention_fp64 points at the algorithm, not at rounding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/mask.h"
#include "reference/cpu_reference.h"

namespace flashattn::ref {

void attention_tiled(const Problem& pr, int block_m, int block_n, const double* q,
                     const double* k, const double* v, double* out, double* lse) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const double scale_log2 = pr.effective_scale() * kLog2e;  // folded into one FMA per score
  const int ratio = pr.hq / pr.hkv;
  const int D = pr.d, DV = pr.value_dim();  // q/k rows are D wide, v/out rows DV
  const Mask<MaskKind::kCausal> causal{pr.sq, pr.sk};
  const Mask<MaskKind::kNone> full{pr.sq, pr.sk};
  // A window (issue 17) runs as the kernels will: MaskKind::kLocal, causal folded in as right = 0.
  const bool windowed = pr.window_left >= 0 || pr.window_right >= 0;
  const Mask<MaskKind::kLocal> local = make_local_mask(pr.sq, pr.sk, pr.window_left, pr.window_right, pr.causal);
  // Softcap / ALiBi: S holds the finished score (scale applied before the tanh), so the
  // softmax folds only log2(e), as FlashAttention 2 does under softcap.
  const bool mods = pr.has_score_mods();
  const double fold = mods ? kLog2e : scale_log2;
  auto at = [](const double* t, int b, int s, int h, int seqlen, int heads, int width) {
    return t + ((int64_t(b) * seqlen + s) * heads + h) * width;
  };
  std::vector<double> S(size_t(block_m) * block_n), acc(size_t(block_m) * DV), m(block_m),
      l(block_m);

  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.hq; ++h) {
      const int hk = h / ratio;
      for (int m0 = 0; m0 < pr.sq; m0 += block_m) {
        const int rows = std::min(block_m, pr.sq - m0);
        std::fill(m.begin(), m.end(), kNegInf);
        std::fill(l.begin(), l.end(), 0.0);
        std::fill(acc.begin(), acc.end(), 0.0);
        // The key blocks the kernels visit for this query block (common/mask.h).
        const BlockRange tiles = windowed    ? local.n_block_range(m0 / block_m, block_m, block_n)
                                 : pr.causal ? causal.n_block_range(m0 / block_m, block_m, block_n)
                                             : full.n_block_range(m0 / block_m, block_m, block_n);
        for (int64_t t = tiles.lo; t < tiles.hi; ++t) {
          const int n0 = int(t * block_n);
          for (int r = 0; r < rows; ++r) {
            const int i = m0 + r;
            const int64_t limit = (windowed ? local.key_end(i) : pr.causal ? causal.key_end(i) : full.key_end(i)) - 1;
            const int64_t first = windowed ? local.key_begin(i) : 0;
            double tile_max = kNegInf;
            for (int c = 0; c < block_n; ++c) {
              const int j = n0 + c;
              double s = kNegInf;  // partial tile or masked: -inf before the max
              if (j < pr.sk && j <= limit && j >= first) {
                s = 0;
                const double* qr = at(q, b, i, h, pr.sq, pr.hq, D);
                const double* kr = at(k, b, j, hk, pr.sk, pr.hkv, D);
                for (int d = 0; d < D; ++d) s += qr[d] * kr[d];
                if (mods) s = score(pr, b, h, i, j, s);
              }
              S[size_t(r) * block_n + c] = s;
              tile_max = std::max(tile_max, s);
            }
            const double m_new = std::max(m[r], tile_max);
            if (m_new == kNegInf) continue;  // every key so far masked: nothing to add
            const double m_scaled = m_new * fold;
            const double alpha = m[r] == kNegInf ? 0.0 : std::exp2(m[r] * fold - m_scaled);
            double rowsum = 0;
            for (int c = 0; c < block_n; ++c) {
              double& s = S[size_t(r) * block_n + c];
              s = s == kNegInf ? 0.0 : std::exp2(std::fma(s, fold, -m_scaled));
              rowsum += s;
            }
            l[r] = l[r] * alpha + rowsum;
            double* a = &acc[size_t(r) * DV];
            for (int e = 0; e < DV; ++e) a[e] *= alpha;
            for (int c = 0; c < block_n; ++c) {
              const int j = n0 + c;
              const double p = S[size_t(r) * block_n + c];
              if (p == 0.0) continue;
              const double* vr = at(v, b, j, hk, pr.sk, pr.hkv, DV);
              for (int e = 0; e < DV; ++e) a[e] += p * vr[e];
            }
            m[r] = m_new;
          }
        }
        for (int r = 0; r < rows; ++r) {
          const int i = m0 + r;
          const double inv = l[r] > 0 ? 1.0 / l[r] : 0.0;  // fully masked row: 0
          double* o = const_cast<double*>(at(out, b, i, h, pr.sq, pr.hq, DV));
          for (int e = 0; e < DV; ++e) o[e] = acc[size_t(r) * DV + e] * inv;
          if (lse)
            lse[(int64_t(b) * pr.hq + h) * pr.sq + i] =
                l[r] > 0 ? (m[r] * fold + std::log2(l[r])) / kLog2e : kNegInf;
        }
      }
    }
}

}  // namespace flashattn::ref
