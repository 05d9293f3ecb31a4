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
};

struct FwdParams : AttnParams {
  Tensor4 o;             // (B, Sq, Hq, Dv), q's dtype
  float* lse = nullptr;  // (B, Hq, Sq) contiguous fp32, or null
};

struct BwdParams : AttnParams {
  ConstTensor4 dout;          // (B, Sq, Hq, Dv), q's dtype
  ConstTensor4 o;             // (B, Sq, Hq, Dv): the forward's output
  const float* lse = nullptr; // (B, Hq, Sq) contiguous fp32, natural log (never null)
  Tensor4 dq;                 // (B, Sq, Hq, D)
  Tensor4 dk;                 // (B, Sk, Hkv, D)
  Tensor4 dv;                 // (B, Sk, Hkv, Dv = d_v)
  bool deterministic = false;
};

}  // namespace flashattn::detail
