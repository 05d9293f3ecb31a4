#include "reference/cpu_reference_inference.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "reference/cpu_reference.h"

namespace flashattn::ref {
namespace {

int value_dim(int d, int dv) { return dv > 0 ? dv : d; }

// One sequence (batch index b) as a dense B = 1 problem, with the call's modifiers.
template <class Pr>
Problem one_sequence(const Pr& pr, int b, int sq, int sk, int dv) {
  Problem one;
  one.window_left = pr.window_left;
  one.window_right = pr.window_right;
  one.softcap = pr.softcap;
  if (!pr.alibi_slopes.empty()) {
    const auto first = pr.alibi_slopes.begin() + static_cast<int64_t>(b) * pr.alibi_batch_stride;
    one.alibi_slopes.assign(first, first + pr.hq);
  }
  const int hq = pr.hq, hkv = pr.hkv, d = pr.d;
  const bool causal = pr.causal;
  const double scale = pr.scale;
  one.b = 1;
  one.sq = sq;
  one.sk = sk;
  one.hq = hq;
  one.hkv = hkv;
  one.d = d;
  one.dv = dv;
  one.causal = causal;
  one.scale = scale;
  return one;
}

// Runs attend(problem, q, k, v, out, lse) on every sequence of a packed batch; lse scattered
// from each sequence's (1, Hq, Sq) into (Hq, total_q).
template <class Attend>
void for_each_varlen(const VarlenProblem& pr, const int32_t* cu_q, const int32_t* cu_k, const double* q,
                     const double* k, const double* v, double* out, double* lse, Attend attend) {
  const int dv = value_dim(pr.d, pr.dv);
  const int64_t total_q = cu_q[pr.b];
  std::vector<double> seq_lse;
  for (int i = 0; i < pr.b; ++i) {
    const int64_t q0 = cu_q[i], k0 = cu_k[i];
    const Problem one = one_sequence(pr, i, static_cast<int>(cu_q[i + 1] - q0), static_cast<int>(cu_k[i + 1] - k0), dv);
    if (one.sq == 0) continue;
    // A sequence's rows are contiguous in the packed tensors: a (1, S, H, width) tensor each.
    seq_lse.assign(static_cast<size_t>(pr.hq) * one.sq, 0.0);
    attend(one, q + q0 * pr.hq * pr.d, k + k0 * pr.hkv * pr.d, v + k0 * pr.hkv * dv, out + q0 * pr.hq * dv,
           lse != nullptr ? seq_lse.data() : nullptr);
    if (lse != nullptr)
      for (int h = 0; h < pr.hq; ++h)
        std::copy_n(seq_lse.begin() + static_cast<int64_t>(h) * one.sq, one.sq, lse + h * total_q + q0);
  }
}

// Appends, then runs attend(...) on each sequence's visible keys gathered densely (nothing past
// them is read); lse per sequence is already in (B, Hq, Sq) order.
template <class Attend>
void for_each_cached(const KvCacheProblem& pr, const int32_t* cache_seqlens, const int32_t* block_table,
                     double* k_cache, double* v_cache, const double* k_new, const double* v_new, const double* q,
                     double* out, double* lse, Attend attend) {
  const int dv = value_dim(pr.d, pr.dv);
  // Row of key j of sequence b in the cache's (rows, Hkv, width) storage.
  auto cache_row = [&](int b, int64_t j) -> int64_t {
    if (pr.page_size == 0) return static_cast<int64_t>(b) * pr.s_cache + j;
    const int64_t page = block_table[static_cast<int64_t>(b) * pr.max_pages + j / pr.page_size];
    return page * pr.page_size + j % pr.page_size;
  };
  std::vector<double> kd, vd;
  for (int b = 0; b < pr.b; ++b) {
    const int64_t len0 = cache_seqlens[b];
    for (int j = 0; j < pr.s_new; ++j) {  // the append
      const int64_t row = cache_row(b, len0 + j);
      const int64_t src = static_cast<int64_t>(b) * pr.s_new + j;
      std::copy_n(k_new + src * pr.hkv * pr.d, pr.hkv * pr.d, k_cache + row * pr.hkv * pr.d);
      std::copy_n(v_new + src * pr.hkv * dv, pr.hkv * dv, v_cache + row * pr.hkv * dv);
    }
    const int64_t len = len0 + pr.s_new;
    kd.resize(static_cast<size_t>(len) * pr.hkv * pr.d);
    vd.resize(static_cast<size_t>(len) * pr.hkv * dv);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t row = cache_row(b, j);
      std::copy_n(k_cache + row * pr.hkv * pr.d, pr.hkv * pr.d, kd.begin() + j * pr.hkv * pr.d);
      std::copy_n(v_cache + row * pr.hkv * dv, pr.hkv * dv, vd.begin() + j * pr.hkv * dv);
    }
    const Problem one = one_sequence(pr, b, pr.sq, static_cast<int>(len), dv);
    const int64_t q_rows = static_cast<int64_t>(b) * pr.sq;
    attend(one, q + q_rows * pr.hq * pr.d, kd.data(), vd.data(), out + q_rows * pr.hq * dv,
           lse != nullptr ? lse + static_cast<int64_t>(b) * pr.hq * pr.sq : nullptr);
  }
}

auto fp64() {
  return [](const Problem& p, const double* q, const double* k, const double* v, double* o, double* l) {
    attention_fp64(p, q, k, v, o, l);
  };
}
auto lowp(DType dt) {
  return [dt](const Problem& p, const double* q, const double* k, const double* v, double* o, double*) {
    attention_lowp(p, dt, q, k, v, o);
  };
}

}  // namespace

void attention_varlen_fp64(const VarlenProblem& pr, const int32_t* cu_q, const int32_t* cu_k,
                           const double* q, const double* k, const double* v, double* out,
                           double* lse) {
  for_each_varlen(pr, cu_q, cu_k, q, k, v, out, lse, fp64());
}

void attention_varlen_lowp(const VarlenProblem& pr, DType dtype, const int32_t* cu_q, const int32_t* cu_k,
                           const double* q, const double* k, const double* v, double* out) {
  for_each_varlen(pr, cu_q, cu_k, q, k, v, out, nullptr, lowp(dtype));
}

void attention_varlen_backward_fp64(const VarlenProblem& pr, const int32_t* cu_q, const int32_t* cu_k,
                                    const double* q, const double* k, const double* v, const double* dout,
                                    double* dq, double* dk, double* dv) {
  const int dvd = value_dim(pr.d, pr.dv);
  for (int i = 0; i < pr.b; ++i) {
    const int64_t q0 = cu_q[i], k0 = cu_k[i];
    const Problem one = one_sequence(pr, i, static_cast<int>(cu_q[i + 1] - q0), static_cast<int>(cu_k[i + 1] - k0), dvd);
    // Each sequence's rows are contiguous (1, S, H, width) tensors; with no queries its dk/dv
    // rows come out 0, with no keys its dq rows.
    attention_backward_fp64(one, q + q0 * pr.hq * pr.d, k + k0 * pr.hkv * pr.d, v + k0 * pr.hkv * dvd,
                            dout + q0 * pr.hq * dvd, dq + q0 * pr.hq * pr.d, dk + k0 * pr.hkv * pr.d,
                            dv + k0 * pr.hkv * dvd);
  }
}

void attention_varlen_backward_lowp(const VarlenProblem& pr, DType dtype, const int32_t* cu_q, const int32_t* cu_k,
                                    const double* q, const double* k, const double* v, const double* out,
                                    const double* lse, const double* dout, double* dq, double* dk, double* dv) {
  const int dvd = value_dim(pr.d, pr.dv);
  const int64_t total_q = cu_q[pr.b];
  std::vector<double> seq_lse;
  for (int i = 0; i < pr.b; ++i) {
    const int64_t q0 = cu_q[i], k0 = cu_k[i];
    const Problem one = one_sequence(pr, i, static_cast<int>(cu_q[i + 1] - q0), static_cast<int>(cu_k[i + 1] - k0), dvd);
    // The sequence's lse as a (1, Hq, Sq) tensor, gathered from (Hq, total_q).
    seq_lse.resize(static_cast<size_t>(pr.hq) * one.sq);
    for (int h = 0; h < pr.hq; ++h)
      std::copy_n(lse + h * total_q + q0, one.sq, seq_lse.begin() + static_cast<int64_t>(h) * one.sq);
    attention_backward_lowp(one, dtype, q + q0 * pr.hq * pr.d, k + k0 * pr.hkv * pr.d, v + k0 * pr.hkv * dvd,
                            out + q0 * pr.hq * dvd, seq_lse.data(), dout + q0 * pr.hq * dvd, dq + q0 * pr.hq * pr.d,
                            dk + k0 * pr.hkv * pr.d, dv + k0 * pr.hkv * dvd);
  }
}

void attention_kvcache_fp64(const KvCacheProblem& pr, const int32_t* cache_seqlens,
                            const int32_t* block_table, double* k_cache, double* v_cache,
                            const double* k_new, const double* v_new, const double* q,
                            double* out, double* lse) {
  for_each_cached(pr, cache_seqlens, block_table, k_cache, v_cache, k_new, v_new, q, out, lse, fp64());
}

void attention_kvcache_lowp(const KvCacheProblem& pr, DType dtype, const int32_t* cache_seqlens,
                            const int32_t* block_table, double* k_cache, double* v_cache,
                            const double* k_new, const double* v_new, const double* q, double* out) {
  for_each_cached(pr, cache_seqlens, block_table, k_cache, v_cache, k_new, v_new, q, out, nullptr, lowp(dtype));
}

}  // namespace flashattn::ref
