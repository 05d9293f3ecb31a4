// CPU references of the attention backward (fp64 and the 16-bit kernel's rounding). Both walk
// one query row at a time: the row's probabilities are formed once and feed that row's dq and
// the dk/dv rows of every key it sees, so no (Sq x Sk) matrix is ever held.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "reference/cpu_reference.h"

namespace flashattn::ref {
namespace {

// Element offset of row (b, s, h) of a contiguous (B, S, H, width) tensor: width is d for q, k,
// dq, dk and value_dim() for v, dout, out, dv.
int64_t row_at(int64_t b, int64_t s, int64_t h, int64_t seqlen, int64_t heads, int64_t width) {
  return ((b * seqlen + s) * heads + h) * width;
}

// Four independent partial sums: the dot products dominate the cost on long sequences and a
// single dependent chain runs at the adder's latency, not its throughput.
template <class T>
T dot(const T* a, const T* b, int n) {
  T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int e = 0;
  for (; e + 4 <= n; e += 4) {
    s0 += a[e] * b[e];
    s1 += a[e + 1] * b[e + 1];
    s2 += a[e + 2] * b[e + 2];
    s3 += a[e + 3] * b[e + 3];
  }
  for (; e < n; ++e) s0 += a[e] * b[e];
  return (s0 + s1) + (s2 + s3);
}

template <class T>
void axpy(T a, const T* x, T* y, int n) {
  for (int e = 0; e < n; ++e) y[e] += a * x[e];
}

// The kernel reads 16-bit inputs: values the caller passes unrounded are rounded first, so the
// yardstick never sees more precision than the kernel under test.
std::vector<float> to_dtype(DType dt, const double* x, int64_t n) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[i] = static_cast<float>(round_to(dt, x[i]));
  return r;
}

float rnd(DType dt, float x) { return static_cast<float>(round_to(dt, x)); }

}  // namespace

void attention_backward_fp64(const Problem& pr, const double* q, const double* k,
                             const double* v, const double* dout, double* dq, double* dk,
                             double* dv) {
  const double scale = pr.effective_scale();
  const int ratio = pr.hq / pr.hkv;
  const int D = pr.d, DV = pr.value_dim();
  const int64_t n_k = int64_t(pr.b) * pr.sk * pr.hkv * D;
  const int64_t n_v = int64_t(pr.b) * pr.sk * pr.hkv * DV;
  std::fill(dk, dk + n_k, 0.0);
  std::fill(dv, dv + n_v, 0.0);
  // Between consecutive keys of one head, in k (and dk) and in v (and dv).
  const int64_t k_stride = int64_t(pr.hkv) * D, v_stride = int64_t(pr.hkv) * DV;
  std::vector<double> p(static_cast<size_t>(pr.sk)), o(static_cast<size_t>(DV));
  // q.k of the row's keys: softcap's derivative needs the pre-tanh value.
  std::vector<double> dots(pr.has_score_mods() ? static_cast<size_t>(pr.sk) : 0);
  const bool mods = pr.has_score_mods();

  for (int64_t b = 0; b < pr.b; ++b)
    for (int64_t h = 0; h < pr.hq; ++h) {
      const int64_t k_at = row_at(b, 0, h / ratio, pr.sk, pr.hkv, D);
      const int64_t v_at = row_at(b, 0, h / ratio, pr.sk, pr.hkv, DV);
      const double *k0 = k + k_at, *v0 = v + v_at;
      double *dk0 = dk + k_at, *dv0 = dv + v_at;
      for (int64_t i = 0; i < pr.sq; ++i) {
        const int64_t qrow = row_at(b, i, h, pr.sq, pr.hq, D);
        const int64_t orow = row_at(b, i, h, pr.sq, pr.hq, DV);
        const double *qi = q + qrow, *doi = dout + orow;
        double* dqi = dq + qrow;
        std::fill(dqi, dqi + D, 0.0);
        const KeyRange keys = key_range(pr, i);
        const int64_t j0 = keys.lo, n = keys.hi;  // keys [j0, n)
        if (n <= j0) continue;  // sees no key: nothing flows through this row

        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = j0; j < n; ++j) {
          if (mods) {
            dots[j] = dot(qi, k0 + j * k_stride, D);
            p[j] = score(pr, int(b), int(h), i, j, dots[j]);
          } else {
            p[j] = scale * dot(qi, k0 + j * k_stride, D);
          }
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = j0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = j0; j < n; ++j) {
          p[j] /= sum;
          axpy(p[j], v0 + j * v_stride, o.data(), DV);
        }
        // rowsum(P * dP) == dO . O: the softmax Jacobian's diagonal correction.
        const double dsum = dot(doi, o.data(), DV);
        for (int64_t j = j0; j < n; ++j) {
          const double ds = p[j] * (dot(doi, v0 + j * v_stride, DV) - dsum);
          // d score / d (q.k): scale, times softcap's 1 - tanh^2; ALiBi adds a constant.
          const double g = mods ? score_grad(pr, dots[j]) : scale;
          axpy(g * ds, k0 + j * k_stride, dqi, D);
          axpy(g * ds, qi, dk0 + j * k_stride, D);
          axpy(p[j], doi, dv0 + j * v_stride, DV);
        }
      }
    }
}

void attention_backward_lowp(const Problem& pr, DType dt, const double* q, const double* k,
                             const double* v, const double* out, const double* lse,
                             const double* dout, double* dq, double* dk, double* dv) {
  const float scale = static_cast<float>(pr.effective_scale());
  const int ratio = pr.hq / pr.hkv;
  const int D = pr.d, DV = pr.value_dim();
  const int64_t n_q = int64_t(pr.b) * pr.sq * pr.hq * D;
  const int64_t n_o = int64_t(pr.b) * pr.sq * pr.hq * DV;
  const int64_t n_k = int64_t(pr.b) * pr.sk * pr.hkv * D;
  const int64_t n_v = int64_t(pr.b) * pr.sk * pr.hkv * DV;
  const std::vector<float> qf = to_dtype(dt, q, n_q), kf = to_dtype(dt, k, n_k),
                           vf = to_dtype(dt, v, n_v), of = to_dtype(dt, out, n_o),
                           dof = to_dtype(dt, dout, n_o);
  // dk/dv stay fp32 until every query head of the group has added in, as a kernel's
  // accumulators (or its fp32 reduction of per-head partials) would.
  std::vector<float> dk_acc(static_cast<size_t>(n_k), 0.f), dv_acc(static_cast<size_t>(n_v), 0.f);
  std::vector<float> dq_acc(static_cast<size_t>(D));
  const int64_t k_stride = int64_t(pr.hkv) * D, v_stride = int64_t(pr.hkv) * DV;

  for (int64_t b = 0; b < pr.b; ++b)
    for (int64_t h = 0; h < pr.hq; ++h) {
      const int64_t k_at = row_at(b, 0, h / ratio, pr.sk, pr.hkv, D);
      const int64_t v_at = row_at(b, 0, h / ratio, pr.sk, pr.hkv, DV);
      const float *k0 = kf.data() + k_at, *v0 = vf.data() + v_at;
      float *dk0 = dk_acc.data() + k_at, *dv0 = dv_acc.data() + v_at;
      for (int64_t i = 0; i < pr.sq; ++i) {
        const int64_t qrow = row_at(b, i, h, pr.sq, pr.hq, D);
        const int64_t orow = row_at(b, i, h, pr.sq, pr.hq, DV);
        const float *qi = qf.data() + qrow, *doi = dof.data() + orow;
        const double l = lse[(b * pr.hq + h) * pr.sq + i];
        const KeyRange keys = key_range(pr, i);
        const int64_t j0 = keys.lo, n = std::isinf(l) && l < 0 ? j0 : keys.hi;  // keys [j0, n)
        std::fill(dq_acc.begin(), dq_acc.end(), 0.f);
        const float lse_f = static_cast<float>(l);
        const float dsum = n > j0 ? dot(doi, of.data() + orow, DV) : 0.f;
        const float slope = pr.alibi_slopes.empty()
                                ? 0.f
                                : static_cast<float>(pr.alibi_slopes[static_cast<size_t>(b * pr.alibi_batch_stride + h)]);
        const float cap = static_cast<float>(pr.softcap);
        for (int64_t j = j0; j < n; ++j) {
          // The score as a kernel forms it in fp32: scale, softcap (keeping tanh for its
          // derivative), ALiBi. Without modifiers exactly scale * q.k.
          float x = scale * dot(qi, k0 + j * k_stride, D), dtanh = 1.f;
          if (pr.softcap > 0) {
            const float t = std::tanh(x / cap);
            x = cap * t;
            dtanh = 1.f - t * t;
          }
          if (!pr.alibi_slopes.empty()) x -= slope * static_cast<float>(std::llabs(i + pr.sk - pr.sq - j));
          const float pj = std::exp(x - lse_f);
          // dS uses the fp32 P; the 16-bit copies are what the tensor-core products consume.
          // Softcap's 1 - tanh^2 joins dS before the rounding (the scale comes at the end).
          float ds_f = pj * (dot(doi, v0 + j * v_stride, DV) - dsum);
          if (pr.softcap > 0) ds_f *= dtanh;
          const float ds = rnd(dt, ds_f);
          axpy(ds, k0 + j * k_stride, dq_acc.data(), D);
          axpy(ds, qi, dk0 + j * k_stride, D);
          axpy(rnd(dt, pj), doi, dv0 + j * v_stride, DV);
        }
        for (int e = 0; e < D; ++e) dq[qrow + e] = round_to(dt, scale * dq_acc[e]);
      }
    }
  for (int64_t e = 0; e < n_k; ++e) dk[e] = round_to(dt, scale * dk_acc[e]);
  for (int64_t e = 0; e < n_v; ++e) dv[e] = round_to(dt, dv_acc[e]);
}

}  // namespace flashattn::ref
