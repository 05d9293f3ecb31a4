// CPU references (host only). Tensors are contiguous: q, k, dq, dk (B, S, H, D); v, out, dout,
// dv (B, S, H, Dv); lse is (B, Hq, Sq).
#pragma once

#include <cstdint>
#include <vector>

#include "flashattn/flashattn.h"

namespace flashattn::ref {

struct Problem {
  int b = 1, sq = 1, sk = 1, hq = 1, hkv = 1, d = 64;
  // Head dim of v, out, dout and dv; 0 means "same as d" (so a caller that never sets it
  // describes the Dv == D problem it always did). Read it through value_dim().
  int dv = 0;
  bool causal = false;
  double scale = 0.0;  // 0 means 1/sqrt(d): q.k's head dim, whatever dv is
  double effective_scale() const;
  int value_dim() const { return dv > 0 ? dv : d; }

  // Issue 17, with AttnParams' meanings (src/common/params.h); the defaults are "off".
  // Sliding window: query i sees key j iff i + sk - sq - window_left <= j <= i + sk - sq +
  // window_right, a negative side unbounded; with causal both apply (causal is right = 0).
  int window_left = -1, window_right = -1;
  // > 0: scores become softcap * tanh(scale * q.k / softcap), before ALiBi and the mask.
  double softcap = 0.0;
  // ALiBi: empty is off; else the score of (batch b, head h, query i, key j) gains
  // -alibi_slopes[b * alibi_batch_stride + h] * |i + sk - sq - j| (stride 0: (Hq,), hq: (B, Hq)).
  std::vector<double> alibi_slopes;
  int64_t alibi_batch_stride = 0;
  bool has_score_mods() const { return softcap > 0 || !alibi_slopes.empty(); }
};

// The keys [lo, hi) query row i sees under pr's causal flag and window, clamped to [0, sk]
// (hi == lo: none). Written from the rule, independent of the kernels' common/mask.h.
struct KeyRange {
  int64_t lo = 0, hi = 0;
};
KeyRange key_range(const Problem& pr, int64_t i);
// What the softmax of (batch b, query head h, row i, key j) takes, from dot = q_i . k_j: the
// scaled score, softcapped, plus ALiBi's bias. Without modifiers exactly dot * scale.
double score(const Problem& pr, int b, int h, int64_t i, int64_t j, double dot);
// d score / d dot: scale * (1 - tanh^2) under softcap, else scale (ALiBi is a constant).
double score_grad(const Problem& pr, double dot);

// Exact attention with fp64 accumulation: the yardstick every kernel is measured against.
void attention_fp64(const Problem& pr, const double* q, const double* k, const double* v,
                    double* out, double* lse);

// The tiled online-softmax algorithm the kernels run (running max, rescale, exp2 with the
// scale folded, final normalisation, partial-tile and fully-masked-row handling), in fp64,
// with the block sizes as parameters.
void attention_tiled(const Problem& pr, int block_m, int block_n, const double* q,
                     const double* k, const double* v, double* out, double* lse);

// Naive attention in the input precision (scores, probabilities and output rounded to
// `dtype`, fp32 accumulation): the "out_lowp" of the correctness rule.
void attention_lowp(const Problem& pr, DType dtype, const double* q, const double* k,
                    const double* v, double* out);

// Exact gradients of attention_fp64 for the loss sum(dout * out), fp64 throughout: the
// forward (scores, probabilities, out) is recomputed here, so only the inputs are needed.
// dq/dk/dv are overwritten; under GQA dk/dv sum their group's query heads. A row that sees no
// key gets dq = 0.
void attention_backward_fp64(const Problem& pr, const double* q, const double* k,
                             const double* v, const double* dout, double* dq, double* dk,
                             double* dv);

// The backward a 16-bit kernel computes, naively (the "lowp" of the correctness rule for
// gradients): takes the forward's out and lse (B, Hq, Sq) as given, fp32 accumulation, P
// rounded to `dtype` before P^T dO, dS rounded before dS K and dS^T Q, results rounded to
// `dtype`. lse = -inf marks a row that sees no key: P = 0, dq = 0.
void attention_backward_lowp(const Problem& pr, DType dtype, const double* q, const double* k,
                             const double* v, const double* out, const double* lse,
                             const double* dout, double* dq, double* dk, double* dv);

// Rounds to the nearest value representable in `dtype` (fp16 / bf16 / fp32).
double round_to(DType dtype, double x);

// The correctness rule (docs/ARCHITECTURE.md): max|out-ref| <= 2*max|lowp-ref| + atol.
struct RuleResult {
  double err = 0, lowp_err = 0, bound = 0;
  bool pass = false;
};
RuleResult check_rule(const std::vector<double>& out, const std::vector<double>& ref,
                      const std::vector<double>& lowp, double atol);

}  // namespace flashattn::ref
