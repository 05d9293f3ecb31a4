// Internal, validated description of one forward call. Built by src/api from ForwardArgs;
// every family launcher takes this and nothing else.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASHATTN_HOST_DEVICE __host__ __device__
#else
#define FLASHATTN_HOST_DEVICE
#endif

namespace flashattn::detail {

enum class ElemType : int { kFloat16 = 0, kBFloat16 = 1 };

struct FwdParams {
  const void* q = nullptr;  // (B, Sq, Hq, D)
  const void* k = nullptr;  // (B, Sk, Hkv, D)
  const void* v = nullptr;  // (B, Sk, Hkv, D)
  void* o = nullptr;        // (B, Sq, Hq, D)
  float* lse = nullptr;     // (B, Hq, Sq) contiguous, or null

  // Sizes fit in int32 (validation guarantees it); element offsets need int64.
  int b = 0, sq = 0, sk = 0, hq = 0, hkv = 0, d = 0;
  int h_ratio = 1;  // hq / hkv

  // Strides in elements for batch, seq, head; headdim stride is 1.
  int64_t q_sb = 0, q_ss = 0, q_sh = 0;
  int64_t k_sb = 0, k_ss = 0, k_sh = 0;
  int64_t v_sb = 0, v_ss = 0, v_sh = 0;
  int64_t o_sb = 0, o_ss = 0, o_sh = 0;

  float scale = 0.f;       // softmax scale applied to q.k
  float scale_log2 = 0.f;  // scale * log2(e): exp(scale*(s-m)) == exp2(scale_log2*(s-m))
  bool causal = false;     // bottom-right: query i sees key j iff j <= i + (sk - sq)
  ElemType dtype = ElemType::kFloat16;
};

// Number of keys visible to query row i under the mask (clamped to [0, sk]).
FLASHATTN_HOST_DEVICE inline int64_t causal_key_limit(int64_t i, int64_t sq, int64_t sk) {
  const int64_t lim = i + (sk - sq) + 1;
  return lim < 0 ? 0 : (lim > sk ? sk : lim);
}

}  // namespace flashattn::detail
