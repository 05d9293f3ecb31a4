// Internal, validated description of one attention call. Built by src/api from the public
// argument structs; every family launcher takes these and nothing else. AttnParams is what
// both directions share; FwdParams adds the forward's outputs (BwdParams will add dout, the
// forward's out/lse and the gradients the same way).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASHATTN_HOST_DEVICE __host__ __device__
#else
#define FLASHATTN_HOST_DEVICE
#endif
// Unroll hint for the device passes only (host compilers warn on the pragma), for loops in
// host/device code.
#ifdef __CUDA_ARCH__
#define FLASHATTN_UNROLL _Pragma("unroll")
#else
#define FLASHATTN_UNROLL
#endif

namespace flashattn::detail {

constexpr float kLog2e = 1.4426950408889634f;  // log2(e): exp(x) == exp2(x * kLog2e)


enum class ElemType : int { kFloat16 = 0, kBFloat16 = 1 };

// A (B, S, H, D) tensor: base pointer and element strides of batch, seq and head; the head-dim
// stride is 1. Offsets are 64-bit (B * S * H * D may pass 2^31).
template <class T>
struct View4 {
  T* ptr = nullptr;
  int64_t sb = 0, ss = 0, sh = 0;
  FLASHATTN_HOST_DEVICE int64_t offset(int64_t b, int64_t s, int64_t h) const { return b * sb + s * ss + h * sh; }
};
using ConstTensor4 = View4<const void>;
using Tensor4 = View4<void>;

struct AttnParams {
  ConstTensor4 q;  // (B, Sq, Hq, D)
  ConstTensor4 k;  // (B, Sk, Hkv, D)
  ConstTensor4 v;  // (B, Sk, Hkv, Dv = d_v)

  // Sizes fit in int32 (validation guarantees it); element offsets need int64.
  // d: head dim of q and k; d_v: head dim of v and of the output (== d unless the caller's v
  // differs, e.g. q/k 192 with v 128). Both multiples of 8 in [8, 256]. (Not "dv": that is
  // the gradient of v in BwdParams.)
  int b = 0, sq = 0, sk = 0, hq = 0, hkv = 0, d = 0, d_v = 0;
  int h_ratio = 1;  // hq / hkv

  float scale = 0.f;       // softmax scale applied to q.k (> 0 once validated)
  float scale_log2 = 0.f;  // scale * log2(e): exp(scale*(s-m)) == exp2(scale_log2*(s-m))
  bool causal = false;     // bottom-right: query i sees key j iff j <= i + (sk - sq) (common/mask.h)
  ElemType dtype = ElemType::kFloat16;

  // Issue 17 score modifiers and the sliding window (FlashAttention 2's semantics). Every default
  // is "off"; with all of them off a call is exactly the plain (or causal) attention above.
  //
  // Sliding window: query i sees key j iff i + sk - sq - window_left <= j <= i + sk - sq +
  // window_right (bottom-right aligned like causal; varlen: per sequence, with its own lengths).
  // -1 (any negative) leaves that side unbounded, so (-1, -1) is no window. causal and a window
  // both apply (their intersection: causal is right = 0); the API stores a causal window call as
  // right = 0. Kernels build the rule with make_local_mask (common/mask.h), MaskKind::kLocal.
  int window_left = -1, window_right = -1;
  // softcap > 0: each score becomes softcap * tanh(scale * q.k / softcap), after the scale and
  // before ALiBi and masking. 0: off. (The softmax then takes finished scores: a kernel folds
  // only log2(e) into its exp2, as reference/tiled_reference.cpp does.)
  float softcap = 0.f;
  // ALiBi: fp32 slopes on the device, or null (off). The score of query i and key j (after the
  // scale and softcap) gains -slope * |i + sk - sq - j|, slope = alibi_slopes[b *
  // alibi_batch_stride + h] for batch (varlen: sequence) b and query head h. alibi_batch_stride
  // 0: one (Hq,) vector for every batch; hq: a contiguous (B, Hq) tensor.
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;

  // A window is set (on either side): the call needs MaskKind::kLocal.
  FLASHATTN_HOST_DEVICE bool has_window() const { return window_left >= 0 || window_right >= 0; }
  // A window, a softcap or ALiBi slopes: only a feature kernel (MaskKind::kLocal, run-time
  // softcap and ALiBi) serves the call.
  FLASHATTN_HOST_DEVICE bool has_features() const { return has_window() || softcap > 0.f || alibi_slopes != nullptr; }
  // The factor inside softcap's tanh, scale / softcap (0: no softcap), and what the kernels'
  // exp2 then multiplies a score by: softcap * log2(e) on tanh(scale * s / softcap), else
  // scale_log2 on s.
  FLASHATTN_HOST_DEVICE float softcap_scale() const { return softcap > 0.f ? scale / softcap : 0.f; }
  FLASHATTN_HOST_DEVICE float exp2_scale() const { return softcap > 0.f ? softcap * kLog2e : scale_log2; }
  // Whether softcap's bound may stand for every row's softmax max (the forward kernels'
  // bounded-max softmax: no max reduction, no O rescale). tanh <= 1 bounds every score by
  // softcap, and exp2's argument is then at least -2 * softcap * log2 e; 2^-120 keeps P a normal
  // number in fp32 and bf16 (normals reach 2^-126; ex2.approx.ftz flushes below them), not in
  // fp16, so softcap <= 41.5 with bf16 only. ALiBi's bias could put a row's true max arbitrarily
  // far below the bound: not with it.
  FLASHATTN_HOST_DEVICE bool softcap_bounds_max() const {
    return softcap > 0.f && dtype == ElemType::kBFloat16 && alibi_slopes == nullptr && 2.f * exp2_scale() <= 120.f;
  }
};

struct FwdParams : AttnParams {
  Tensor4 o;             // (B, Sq, Hq, Dv), q's dtype
  float* lse = nullptr;  // (B, Hq, Sq) contiguous fp32, or null; varlen: (Hq, total_q)

  // Varlen (packed) batches: q, o are (1, total_q, H, D) and k, v (1, total_k, Hkv, D) views
  // (sb unused); sequence i owns rows [cu_q[i], cu_q[i+1]) of q/o and [cu_k[i], cu_k[i+1]) of
  // k/v (device int32, B + 1 entries). b is the number of sequences, sq / sk the caller's
  // max_seqlen_q / max_seqlen_k (bounds of every sequence's length: kernels clamp to them and
  // to total_q / total_k, so bad offsets cannot move a write outside o or lse).
  const int* cu_q = nullptr;
  const int* cu_k = nullptr;
  int total_q = 0, total_k = 0;
  FLASHATTN_HOST_DEVICE bool varlen() const { return cu_q != nullptr; }
};

// A KV-cache call (flash_attn_with_kvcache): append k_new / v_new into the cache in place at
// each sequence's cache_seqlens, then attention of q over the first cache_seqlens + s_new keys.
// The AttnParams part describes the attention: q (B, Sq, Hq, D); k, v the caches: contiguous
// (B, s_cache, Hkv, D|Dv) views, or paged (num_pages, page_size, Hkv, D|Dv) views whose sb is
// the page stride; sk = the largest possible key count (contiguous: s_cache; paged:
// max_pages * page_size). Keys at or past a sequence's cache_seqlens + s_new are never read.
struct KvCacheParams : AttnParams {
  Tensor4 k_cache, v_cache;        // the same memory as k, v, writable (for the append)
  ConstTensor4 k_new, v_new;       // (B, s_new, Hkv, D|Dv); ptr null when s_new == 0
  int s_new = 0;
  const int* cache_seqlens = nullptr;  // (B,) device int32, or null: every sequence has cache_seqlen
  int cache_seqlen = 0;
  // Paged: block_table (B, max_pages) device int32 row-major (row stride block_table_stride);
  // key j of sequence b is row j % page_size of page block_table[b][j / page_size].
  const int* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0;  // 0: contiguous
  int max_pages = 0;
  int num_pages = 0;  // pages in the pool (page indices outside [0, num_pages) are never touched)
  Tensor4 o;             // (B, Sq, Hq, Dv), q's dtype
  float* lse = nullptr;  // (B, Hq, Sq) contiguous fp32, or null
  int num_splits = 0;    // key splits per (sequence, KV head); 0: heuristic
  FLASHATTN_HOST_DEVICE bool paged() const { return block_table != nullptr; }
};

struct BwdParams : AttnParams {
  ConstTensor4 dout;          // (B, Sq, Hq, Dv), q's dtype
  ConstTensor4 o;             // (B, Sq, Hq, Dv): the forward's output
  const float* lse = nullptr; // (B, Hq, Sq) contiguous fp32, natural log (never null); varlen: (Hq, total_q)
  Tensor4 dq;                 // (B, Sq, Hq, D)
  Tensor4 dk;                 // (B, Sk, Hkv, D)
  Tensor4 dv;                 // (B, Sk, Hkv, Dv = d_v)
  bool deterministic = false;

  // Varlen (packed) batches, exactly as FwdParams: q, o, dout, dq are (1, total_q, H, D) views,
  // k, v, dk, dv (1, total_k, Hkv, D); b is the number of sequences, sq / sk the max lengths
  // (capped by the packed rows). Gradient rows outside every sequence are never written.
  const int* cu_q = nullptr;
  const int* cu_k = nullptr;
  int total_q = 0, total_k = 0;
  FLASHATTN_HOST_DEVICE bool varlen() const { return cu_q != nullptr; }
};

}  // namespace flashattn::detail
