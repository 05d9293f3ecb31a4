// CPU fp64 references of the serving-side calls (issue 16): packed variable-length batches and
// KV caches (contiguous or paged), defined as the dense fp64 attention of each sequence. They fix
// the semantics the kernels will be measured against (FlashAttention 2's): causal is
// bottom-right aligned per sequence; a sequence without keys gives out 0 and lse -inf.
#pragma once

#include <cstdint>
#include <vector>

#include "flashattn/flashattn.h"

namespace flashattn::ref {

// Packed rows: q (total_q, Hq, D), k (total_k, Hkv, D), v (total_k, Hkv, Dv), out
// (total_q, Hq, Dv), lse (Hq, total_q), all contiguous. cu_q / cu_k: B + 1 nondecreasing offsets
// starting at 0; sequence i owns rows [cu[i], cu[i + 1]) (zero-length sequences allowed).
struct VarlenProblem {
  int b = 1, hq = 1, hkv = 1, d = 64;
  int dv = 0;  // 0: d
  bool causal = false;
  double scale = 0.0;  // 0: 1/sqrt(d)
  // Issue 17's modifiers, per sequence, with ref::Problem's meanings (window bottom-right against
  // the sequence's own lengths; ALiBi slopes (Hq,) shared, or (B, Hq) with stride Hq).
  int window_left = -1, window_right = -1;
  double softcap = 0.0;
  std::vector<double> alibi_slopes;
  int64_t alibi_batch_stride = 0;
};
void attention_varlen_fp64(const VarlenProblem& pr, const int32_t* cu_q, const int32_t* cu_k,
                           const double* q, const double* k, const double* v, double* out,
                           double* lse);
// The same in the input precision (attention_lowp per sequence): the rule's yardstick. No lse.
void attention_varlen_lowp(const VarlenProblem& pr, DType dtype, const int32_t* cu_q, const int32_t* cu_k,
                           const double* q, const double* k, const double* v, double* out);

// Gradients of attention_varlen_fp64 for the loss sum(dout * out): attention_backward_fp64 of
// each sequence (dout and dq packed like out and q, dk / dv like k / v; GQA sums as the dense
// one). Rows outside every sequence of dq, dk and dv are left as they are.
void attention_varlen_backward_fp64(const VarlenProblem& pr, const int32_t* cu_q, const int32_t* cu_k,
                                    const double* q, const double* k, const double* v, const double* dout,
                                    double* dq, double* dk, double* dv);
// The same in the input precision (attention_backward_lowp per sequence), fed the forward's out
// and lse (Hq, total_q): the rule's yardstick for varlen gradients.
void attention_varlen_backward_lowp(const VarlenProblem& pr, DType dtype, const int32_t* cu_q, const int32_t* cu_k,
                                    const double* q, const double* k, const double* v, const double* out,
                                    const double* lse, const double* dout, double* dq, double* dk, double* dv);

// A KV cache of B sequences. Contiguous (page_size == 0): k_cache (B, s_cache, Hkv, D), v_cache
// (B, s_cache, Hkv, Dv). Paged (page_size > 0): (num_pages, page_size, Hkv, D or Dv), and key j
// of sequence b sits in page block_table[b * max_pages + j / page_size] at row j % page_size.
// The call first writes k_new / v_new (B, s_new, Hkv, D or Dv; none if s_new == 0) at keys
// [cache_seqlens[b], cache_seqlens[b] + s_new) of each sequence, in place, then q (B, Sq, Hq, D)
// attends to the first cache_seqlens[b] + s_new keys (causal: bottom-right against that length).
// Keys past that length are never read (they may hold anything, NaN included). out
// (B, Sq, Hq, Dv), lse (B, Hq, Sq).
struct KvCacheProblem {
  int b = 1, sq = 1, hq = 1, hkv = 1, d = 64;
  int dv = 0;  // 0: d
  bool causal = false;
  double scale = 0.0;  // 0: 1/sqrt(d)
  int s_new = 0;
  int s_cache = 0;    // contiguous: keys per sequence the cache holds
  int page_size = 0;  // paged: rows per page (0: contiguous)
  int max_pages = 0;  // paged: block_table's row length
  // Issue 17's modifiers, per sequence, with ref::Problem's meanings (window bottom-right against
  // the sequence's own lengths; ALiBi slopes (Hq,) shared, or (B, Hq) with stride Hq).
  int window_left = -1, window_right = -1;
  double softcap = 0.0;
  std::vector<double> alibi_slopes;
  int64_t alibi_batch_stride = 0;
};
void attention_kvcache_fp64(const KvCacheProblem& pr, const int32_t* cache_seqlens,
                            const int32_t* block_table, double* k_cache, double* v_cache,
                            const double* k_new, const double* v_new, const double* q,
                            double* out, double* lse);
// The same in the input precision (attention_lowp per sequence, after the same append). No lse.
void attention_kvcache_lowp(const KvCacheProblem& pr, DType dtype, const int32_t* cache_seqlens,
                            const int32_t* block_table, double* k_cache, double* v_cache,
                            const double* k_new, const double* v_new, const double* q, double* out);

}  // namespace flashattn::ref
