// Kernel parameters of the sm80 forward kernel: the flat fields the kernel reads, filled from
// detail::FwdParams by the launcher. Kept apart from FwdParams so the API-side params can change
// shape without changing the kernels' parameter layout.
#pragma once

#include <cstdint>

#include "common/params.h"

namespace flashattn::sm80 {

struct Sm80FwdArgs {
  const void* q;  // (B, Sq, Hq, D)
  const void* k;  // (B, Sk, Hkv, D)
  const void* v;  // (B, Sk, Hkv, Dv)
  void* o;        // (B, Sq, Hq, Dv)
  float* lse;     // (B, Hq, Sq) contiguous, or null
  int b, sq, sk, hq, hkv, d;
  int h_ratio;  // hq / hkv
  // Strides in elements for batch, seq, head; head-dim stride is 1.
  int64_t q_sb, q_ss, q_sh;
  int64_t k_sb, k_ss, k_sh;
  int64_t v_sb, v_ss, v_sh;
  int64_t o_sb, o_ss, o_sh;
  float scale;
  float scale_log2;
  detail::ElemType dtype;
  // Head dim of v and out. Last, in what was the struct's tail padding: the parameter block (and
  // so every unpadded kernel's code) is the same as before d_v existed.
  int d_v;

  static Sm80FwdArgs from(const detail::FwdParams& p) {
    return {p.q.ptr, p.k.ptr, p.v.ptr, p.o.ptr, p.lse,   p.b,    p.sq,   p.sk,    p.hq,
            p.hkv,   p.d,     p.h_ratio, p.q.sb, p.q.ss, p.q.sh, p.k.sb, p.k.ss, p.k.sh,
            p.v.sb,  p.v.ss,  p.v.sh,  p.o.sb, p.o.ss,  p.o.sh, p.scale, p.scale_log2, p.dtype, p.d_v};
  }
};
static_assert(sizeof(Sm80FwdArgs) == 184, "the kernel parameter block changed size (d_v must fill the tail padding)");

}  // namespace flashattn::sm80
