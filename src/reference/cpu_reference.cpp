#include "reference/cpu_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace flashattn::ref {
namespace {

// Element e of row (b, s, h) of a contiguous (B, seqlen, heads, width) tensor: width is d for
// q and k, value_dim() for v and out.
int64_t idx(int b, int s, int h, int e, int seqlen, int heads, int width) {
  return ((static_cast<int64_t>(b) * seqlen + s) * heads + h) * width + e;
}

float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf/nan unchanged
  u += 0x7fffu + ((u >> 16) & 1u);                  // round to nearest even
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

double fp16_round(double x) {
  if (!std::isfinite(x)) return x;
  const double ax = std::fabs(x);
  if (ax >= 65520.0) return std::copysign(std::numeric_limits<double>::infinity(), x);
  int e;
  std::frexp(ax, &e);                          // ax = f * 2^e, f in [0.5, 1)
  const int exp_unit = std::max(e - 11, -24);  // 11 significant bits; subnormals below 2^-14
  const double unit = std::ldexp(1.0, exp_unit);
  return std::copysign(std::nearbyint(ax / unit) * unit, x);  // default rounding: ties-to-even
}

}  // namespace

double Problem::effective_scale() const { return scale > 0 ? scale : 1.0 / std::sqrt(double(d)); }

// Bottom-right aligned: the diagonal of row i is key i + sk - sq.
KeyRange key_range(const Problem& pr, int64_t i) {
  const int64_t diag = i + pr.sk - pr.sq;
  int64_t lo = 0, hi = pr.sk;
  if (pr.window_left >= 0) lo = diag - pr.window_left;
  if (pr.window_right >= 0) hi = diag + pr.window_right + 1;
  if (pr.causal) hi = std::min<int64_t>(hi, diag + 1);
  lo = std::clamp<int64_t>(lo, 0, pr.sk);
  hi = std::clamp<int64_t>(hi, 0, pr.sk);
  return {lo, std::max(lo, hi)};
}

double score(const Problem& pr, int b, int h, int64_t i, int64_t j, double dot) {
  double s = dot * pr.effective_scale();
  if (pr.softcap > 0) s = pr.softcap * std::tanh(s / pr.softcap);
  if (!pr.alibi_slopes.empty()) {
    const double slope = pr.alibi_slopes[static_cast<size_t>(b * pr.alibi_batch_stride + h)];
    s -= slope * static_cast<double>(std::llabs(i + pr.sk - pr.sq - j));
  }
  return s;
}

double score_grad(const Problem& pr, double dot) {
  const double scale = pr.effective_scale();
  if (!(pr.softcap > 0)) return scale;
  const double t = std::tanh(dot * scale / pr.softcap);
  return scale * (1.0 - t * t);
}

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::kFloat16: return fp16_round(x);
    case DType::kBFloat16: return bf16_round(static_cast<float>(x));
    case DType::kFloat32: return static_cast<float>(x);
  }
  return x;
}

void attention_fp64(const Problem& pr, const double* q, const double* k, const double* v,
                    double* out, double* lse) {
  const double scale = pr.effective_scale();
  const int ratio = pr.hq / pr.hkv;
  const int dv = pr.value_dim();
  const bool mods = pr.has_score_mods();
  std::vector<double> s(pr.sk);
  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.hq; ++h)
      for (int i = 0; i < pr.sq; ++i) {
        const int hk = h / ratio;
        const KeyRange keys = key_range(pr, i);
        const int64_t j0 = keys.lo, n = keys.hi;  // keys [j0, n)
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = j0; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < pr.d; ++d)
            dot += q[idx(b, i, h, d, pr.sq, pr.hq, pr.d)] *
                   k[idx(b, int(j), hk, d, pr.sk, pr.hkv, pr.d)];
          s[j] = mods ? score(pr, b, h, i, j, dot) : dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = j0; j < n; ++j) sum += std::exp(s[j] - mx);
        for (int e = 0; e < dv; ++e) {
          double acc = 0;
          for (int64_t j = j0; j < n; ++j)
            acc += std::exp(s[j] - mx) * v[idx(b, int(j), hk, e, pr.sk, pr.hkv, dv)];
          out[idx(b, i, h, e, pr.sq, pr.hq, dv)] = n > j0 ? acc / sum : 0.0;
        }
        if (lse)
          lse[(int64_t(b) * pr.hq + h) * pr.sq + i] =
              n > j0 ? mx + std::log(sum) : -std::numeric_limits<double>::infinity();
      }
}

void attention_lowp(const Problem& pr, DType dt, const double* q, const double* k,
                    const double* v, double* out) {
  const double scale = pr.effective_scale();
  const int ratio = pr.hq / pr.hkv;
  const int dv = pr.value_dim();
  std::vector<double> p(pr.sk);
  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.hq; ++h)
      for (int i = 0; i < pr.sq; ++i) {
        const int hk = h / ratio;
        const KeyRange keys = key_range(pr, i);
        const int64_t j0 = keys.lo, n = keys.hi;  // keys [j0, n)
        const float slope = pr.alibi_slopes.empty()
                                ? 0.f
                                : float(pr.alibi_slopes[size_t(b * pr.alibi_batch_stride + h)]);
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = j0; j < n; ++j) {
          float dot = 0;
          for (int d = 0; d < pr.d; ++d)
            dot += float(q[idx(b, i, h, d, pr.sq, pr.hq, pr.d)]) *
                   float(k[idx(b, int(j), hk, d, pr.sk, pr.hkv, pr.d)]);
          float x = dot * float(scale);  // the score modifiers in fp32, as a kernel applies them
          if (pr.softcap > 0) x = float(pr.softcap) * std::tanh(x / float(pr.softcap));
          if (!pr.alibi_slopes.empty()) x -= slope * float(std::llabs(int64_t(i) + pr.sk - pr.sq - j));
          p[j] = round_to(dt, x);
          mx = std::max(mx, float(p[j]));
        }
        float sum = 0;
        for (int64_t j = j0; j < n; ++j) sum += std::exp(float(p[j]) - mx);
        for (int64_t j = j0; j < n; ++j) p[j] = round_to(dt, std::exp(float(p[j]) - mx) / sum);
        for (int e = 0; e < dv; ++e) {
          float acc = 0;
          for (int64_t j = j0; j < n; ++j)
            acc += float(p[j]) * float(v[idx(b, int(j), hk, e, pr.sk, pr.hkv, dv)]);
          out[idx(b, i, h, e, pr.sq, pr.hq, dv)] = round_to(dt, acc);
        }
      }
}

RuleResult check_rule(const std::vector<double>& out, const std::vector<double>& ref,
                      const std::vector<double>& lowp, double atol) {
  RuleResult r;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(out[i] - ref[i]);
    r.err = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(r.err, e);
    r.lowp_err = std::max(r.lowp_err, std::fabs(lowp[i] - ref[i]));
  }
  r.bound = 2 * r.lowp_err + atol;
  r.pass = r.err <= r.bound;
  return r;
}

}  // namespace flashattn::ref
