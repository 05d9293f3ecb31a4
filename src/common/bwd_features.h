// The backward feature kernels' extra arguments (window, softcap, ALiBi; MaskKind::kLocal
// configurations of both families), as a template over a family's plain argument block (dense
// or varlen), so the kernels without them keep their parameter block and their code.
#pragma once

#include <cstdint>

#include "common/mask.h"
#include "common/params.h"

namespace flashattn::detail {

template <class Base>
struct WithBwdFeatures : Base {
  // The window in Mask<kLocal>'s bounded form (common/mask.h make_local_mask): left in [0, sk],
  // right in [0, sq]. Varlen: bounded by the max lengths, so an unbounded side stays unbounded
  // for every sequence.
  int window_left = 0, window_right = 0;
  // scale / softcap, or 0 (off); with it on, scale_log2 is softcap * log2(e) and the scores the
  // softmax took were t = tanh(S * softcap_scale) in units of softcap.
  float softcap_scale = 0.f;
  // ALiBi: slopes (index b * alibi_bstride + query head, b the batch or the sequence), or null.
  const float* alibi = nullptr;
  int64_t alibi_bstride = 0;
};

// The feature fields of `a` from p, and the exp2 scale they imply (under softcap P = exp2(softcap
// log2(e) t - lse_log2)). A causal call without a window is the window (unbounded, 0).
template <class Base>
void set_bwd_features(WithBwdFeatures<Base>& a, const BwdParams& p) {
  const Mask<MaskKind::kLocal> w = make_local_mask(p.sq, p.sk, p.window_left, p.window_right, p.causal);
  a.window_left = w.left;
  a.window_right = w.right;
  a.alibi = p.alibi_slopes;
  a.alibi_bstride = p.alibi_batch_stride;
  a.softcap_scale = p.softcap_scale();
  a.scale_log2 = p.exp2_scale();
}

}  // namespace flashattn::detail
