// Kernel parameters of the sm80 forward kernel: the flat fields the kernel reads, filled from
// detail::FwdParams by the launcher. Kept apart from FwdParams so the API-side params can change
// shape without changing the kernels' parameter layout.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/env_switch.h"
#include "common/mask.h"
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

// Parameter block of the varlen kernels (Sm80FwdVarlen): the dense one plus the packed batch's
// offsets. q, o, k, v are (1, total, H, D) views (their batch strides are not read); lse, if not
// null, is (Hq, total_q). b is the number of sequences, sq / sk the max lengths.
struct Sm80FwdVarlenArgs : Sm80FwdArgs {
  const int* cu_q;  // (b + 1,) device int32 offsets into q / o rows
  const int* cu_k;  // (b + 1,) device int32 offsets into k / v rows
  int total_q, total_k;

  static Sm80FwdVarlenArgs from(const detail::FwdParams& p) {
    Sm80FwdVarlenArgs a{};
    static_cast<Sm80FwdArgs&>(a) = Sm80FwdArgs::from(p);
    a.cu_q = p.cu_q;
    a.cu_k = p.cu_k;
    a.total_q = p.total_q;
    a.total_k = p.total_k;
    return a;
  }
};

namespace args_detail {
// The window and score-modifier fields of a feature parameter block (both forms below) from p.
// The window is built from p.sq / p.sk, which for varlen calls are the max lengths: a side
// clamped to (or left unbounded as) a max length hides nothing in any sequence either, since a
// sequence's lengths are at most the max ones (left >= sk_b or right >= sq_b sees every key on
// that side), so the one window serves every sequence with its own lengths exactly.
template <class A>
void set_feature_fields(A& a, const detail::FwdParams& p) {
  const Mask<MaskKind::kLocal> w = make_local_mask(p.sq, p.sk, p.window_left, p.window_right, p.causal);
  a.window_left = w.left;
  a.window_right = w.right;
  a.softcap_scale = softcap_scale_arg(p);  // negative: the softmax's step_bounded
  a.scale_log2 = p.exp2_scale();
  a.alibi = p.alibi_slopes;
  a.alibi_bstride = p.alibi_batch_stride;
}
}  // namespace args_detail

// Parameter block of the feature kernels (Sm80FwdFeature): the dense one plus the window and
// the score modifiers. scale_log2 (inherited) is what the softmax's exp2 multiplies a score by:
// FwdParams::exp2_scale(), softcap * log2(e) under softcap (the scores are then tanh values).
struct Sm80FwdFeatureArgs : Sm80FwdArgs {
  int window_left, window_right;  // Mask<kLocal>'s bounded form (common/mask.h make_local_mask)
  float softcap_scale;            // scale / softcap, or 0: no softcap; < 0: bounded max (set_feature_fields)
  const float* alibi;             // slopes, alibi[b * alibi_bstride + h], or null: no ALiBi
  int64_t alibi_bstride;

  static Sm80FwdFeatureArgs from(const detail::FwdParams& p) {
    Sm80FwdFeatureArgs a{};
    static_cast<Sm80FwdArgs&>(a) = Sm80FwdArgs::from(p);
    args_detail::set_feature_fields(a, p);
    return a;
  }
};

// A parameter block plus the feature fields of Sm80FwdFeatureArgs, in the same order and with
// the same meaning. Base = Sm80FwdVarlenArgs: the varlen feature kernels (Sm80FwdFeature over
// Sm80FwdVarlen), window sides bounded by the max lengths (see set_feature_fields) and ALiBi's
// batch index the sequence's. (Sm80FwdFeatureArgs stays a struct of its own: the dense feature
// kernels' parameter type, and so their names, are unchanged.)
template <class Base>
struct WithFeatures : Base {
  int window_left, window_right;
  float softcap_scale;
  const float* alibi;
  int64_t alibi_bstride;

  static WithFeatures from(const detail::FwdParams& p) {
    WithFeatures a{};
    static_cast<Base&>(a) = Base::from(p);
    args_detail::set_feature_fields(a, p);
    return a;
  }
};
using Sm80FwdVarlenFeatureArgs = WithFeatures<Sm80FwdVarlenArgs>;

// The parameter block of sm80_fwd_kernel's configurations (fwd/kernel.h): every one but the
// varlen feature ones. Its text is part of those kernels' mangled names (the alias expands into
// them), so it stays as it was; Sm80FwdParamsOf below names every configuration's block.
template <class Cfg>
using Sm80FwdArgsOf = std::conditional_t<Cfg::kVarlen, Sm80FwdVarlenArgs,
                                         std::conditional_t<Cfg::kFeature, Sm80FwdFeatureArgs, Sm80FwdArgs>>;

// The parameter block of a kernel configuration: the varlen feature kernels
// (sm80_fwd_varlen_feature_kernel) take Sm80FwdVarlenFeatureArgs, the others Sm80FwdArgsOf.
template <class Cfg>
using Sm80FwdParamsOf = std::conditional_t<Cfg::kVarlen && Cfg::kFeature, Sm80FwdVarlenFeatureArgs, Sm80FwdArgsOf<Cfg>>;

}  // namespace flashattn::sm80
