// Argument validation and conversion of the public argument structs into the internal params.
#pragma once

#include <cstdint>
#include <string>

#include "common/params.h"
#include "flashattn/flashattn.h"

namespace flashattn::detail {

// Validates `a`; on success fills `*p` (when non-null) and sets `*empty` when any size is 0.
Status validate_and_convert(const ForwardArgs& a, FwdParams* p, bool* empty);

// The KV-cache call's rules (api/kvcache.cpp): the caches contiguous or paged, k_new/v_new
// matching them, out/lse like the forward's, and out not sharing a byte with any input.
Status validate_and_convert(const KvCacheArgs& a, KvCacheParams* p, bool* empty);

// Rules every tensor argument follows, for the validators of each call: sizes and strides
// non-negative and within int32 (empty: only those); otherwise unit head-dim stride, other
// strides multiples of 8 elements, a non-null 16-byte aligned base, offsets within int64.
Status check_tensor_layout(const TensorRef& t, const char* name, bool empty);
// float16 or bfloat16.
Status check_dtype16(const TensorRef& t, const char* name);
std::string shape_string(const TensorRef& t);

// Issue 17's modifiers, as every call that takes them (ForwardArgs, KvCacheArgs) spells them:
// window sides -1 or >= 0, softcap finite and >= 0, ALiBi slopes 4-byte aligned with a batch
// stride of 0 or >= hq; each failure names its field.
Status check_score_mods(int window_left, int window_right, float softcap, const float* alibi_slopes,
                        int64_t alibi_batch_stride, int64_t hq);
template <class Args>
Status check_score_mods(const Args& a, int64_t hq) {
  return check_score_mods(a.window_left, a.window_right, a.softcap, a.alibi_slopes, a.alibi_batch_stride, hq);
}
// Writes them into r; a causal call with a window keeps their intersection (right = 0).
template <class Args>
void set_score_mods(const Args& a, AttnParams& r) {
  r.window_left = a.window_left;
  r.window_right = a.causal && (a.window_left >= 0 || a.window_right >= 0) ? 0 : a.window_right;
  r.softcap = a.softcap;
  r.alibi_slopes = a.alibi_slopes;
  r.alibi_batch_stride = a.alibi_slopes != nullptr ? a.alibi_batch_stride : 0;
}

// The backward's rules: q, k, v, out as the forward takes them, dout/dq like q, dk/dv like k/v,
// lse present and aligned, and no gradient sharing a byte with an input or another gradient.
// On success fills `*p` (when non-null and the call is not empty) and sets `*empty` when any
// size is 0. An empty call reads no input, so only the gradients that have elements (the ones
// backward() zero-fills) are checked beyond shapes and dtypes. Varlen (cu_seqlens_q set): the
// forward's varlen rules, every tensor packed; empty also when no sequence can have a query
// (num_seqs, total_q or max_seqlen_q 0) or a key (max_seqlen_k 0).
Status validate_and_convert(const BackwardArgs& a, BwdParams* p, bool* empty);

// The bytes a strided view touches, for the overlap check: `block` contiguous bytes at
// base + sum(i_k * stride[k]) for every index i_k < size[k] (strides in bytes, any order).
struct ByteSet {
  uintptr_t base = 0;
  int rank = 0;
  int64_t size[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t block = 0;
};

// A 16-bit (B, S, H, D) tensor's bytes; empty when any size is 0.
ByteSet byte_set(const TensorRef& t);

enum class Overlap { kDisjoint, kOverlap, kUnknown };

// Whether two views share a byte: exact, except that a pair whose strides interleave so finely
// that deciding takes more than a fixed amount of work answers kUnknown (callers treat it as an
// overlap: a gradient written over an input would go unnoticed otherwise).
Overlap overlap(const ByteSet& a, const ByteSet& b);

// Whether two elements of one view share a byte (a stride of 0, or one smaller than what it
// steps over); kUnknown as above.
Overlap self_overlap(const ByteSet& v);

}  // namespace flashattn::detail
