#include "reference/cpu_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Keys 0..n-1 are visible to query row i; causal is bottom-right aligned (written out here
// rather than shared with the kernels' helper, so the reference stays independent).
int64_t visible_keys(const Problem& pr, int i) {
  return pr.causal ? std::clamp<int64_t>(int64_t(i) + pr.sk - pr.sq + 1, 0, pr.sk) : pr.sk;
}

}  // namespace

double Problem::effective_scale() const { return scale > 0 ? scale : 1.0 / std::sqrt(double(d)); }

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
  std::vector<double> s(pr.sk);
  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.hq; ++h)
      for (int i = 0; i < pr.sq; ++i) {
        const int hk = h / ratio;
        const int64_t n = visible_keys(pr, i);
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < pr.d; ++d)
            dot += q[idx(b, i, h, d, pr.sq, pr.hq, pr.d)] *
                   k[idx(b, int(j), hk, d, pr.sk, pr.hkv, pr.d)];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - mx);
        for (int e = 0; e < dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < n; ++j)
            acc += std::exp(s[j] - mx) * v[idx(b, int(j), hk, e, pr.sk, pr.hkv, dv)];
          out[idx(b, i, h, e, pr.sq, pr.hq, dv)] = n > 0 ? acc / sum : 0.0;
        }
        if (lse)
          lse[(int64_t(b) * pr.hq + h) * pr.sq + i] =
              n > 0 ? mx + std::log(sum) : -std::numeric_limits<double>::infinity();
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
        const int64_t n = visible_keys(pr, i);
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          float dot = 0;
          for (int d = 0; d < pr.d; ++d)
            dot += float(q[idx(b, i, h, d, pr.sq, pr.hq, pr.d)]) *
                   float(k[idx(b, int(j), hk, d, pr.sk, pr.hkv, pr.d)]);
          p[j] = round_to(dt, dot * float(scale));
          mx = std::max(mx, float(p[j]));
        }
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(float(p[j]) - mx);
        for (int64_t j = 0; j < n; ++j) p[j] = round_to(dt, std::exp(float(p[j]) - mx) / sum);
        for (int e = 0; e < dv; ++e) {
          float acc = 0;
          for (int64_t j = 0; j < n; ++j)
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
