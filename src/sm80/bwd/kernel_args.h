// Kernel parameters of the sm80 backward's three kernels, filled from detail::BwdParams by the
// launcher (bwd/launch.h). Flat fields, so the API-side params can change shape without changing
// the kernels' parameter layout.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/bwd_features.h"
#include "common/mask.h"
#include "common/params.h"

namespace flashattn::sm80 {

// Scratch layout (bwd/launch.h): lse_log2 and dsum are (B, Hq, sq_pad) fp32, sq_pad = the query
// blocks' rows; dq_accum is (B, Hq, sq_pad, kHeadDim) fp32, row-major; dq_turn (deterministic
// mode only, else null) one int per (B, Hq, query block).
struct Sm80BwdArgs {
  const void* q;     // (B, Sq, Hq, D)
  const void* k;     // (B, Sk, Hkv, D)
  const void* v;     // (B, Sk, Hkv, Dv)
  const void* dout;  // (B, Sq, Hq, Dv)
  void* dk;          // (B, Sk, Hkv, D)
  void* dv;          // (B, Sk, Hkv, Dv)
  const float* lse_log2;
  const float* dsum;
  float* dq_accum;
  int* dq_turn;
  int64_t q_sb, q_ss, q_sh;
  int64_t k_sb, k_ss, k_sh;
  int64_t v_sb, v_ss, v_sh;
  int64_t do_sb, do_ss, do_sh;
  int64_t dk_sb, dk_ss, dk_sh;
  int64_t dv_sb, dv_ss, dv_sh;
  int sq, sk, hq, h_ratio, d, d_v;
  int sq_pad, num_m_blocks;
  float scale;       // dK = scale * dS^T Q (dQ's scale is the postprocess's)
  float scale_log2;  // P = exp2(S * scale_log2 - lse_log2)
};

// The feature kernels' arguments (MaskKind::kLocal, issue 17): a plain block plus
// common/bwd_features.h's window and run-time softcap / ALiBi fields. A separate type, so the
// kNone / kCausal kernels keep their parameter layout (and code).
using Sm80BwdFeatureArgs = detail::WithBwdFeatures<Sm80BwdArgs>;

// The varlen kernels' (Cfg::kVarlen, bwd/config.h Sm80BwdVarlen): q, dout, dq (1, total_q, H, D)
// views and k, v, dk, dv (1, total_k, Hkv, D), batch strides unread; blockIdx.z is the sequence.
// sq / sk are the max lengths. Scratch rows follow common/varlen_layout.h: sq_pad is the padded
// rows of one head (VarlenLayout::num_blocks * kBlockM), (b, h, row m) sits at h * sq_pad +
// first_block(b) * kBlockM + m; num_m_blocks = ceil(sq / kBlockM) sizes the deterministic turns.
struct Sm80BwdVarlenArgs : Sm80BwdArgs {
  const int* cu_q;
  const int* cu_k;
  int total_q, total_k;
};
using Sm80BwdVarlenFeatureArgs = detail::WithBwdFeatures<Sm80BwdVarlenArgs>;

template <MaskKind Kind, bool kVarlen = false>
using Sm80BwdArgsOf =
    std::conditional_t<kVarlen, std::conditional_t<Kind == MaskKind::kLocal, Sm80BwdVarlenFeatureArgs, Sm80BwdVarlenArgs>,
                       std::conditional_t<Kind == MaskKind::kLocal, Sm80BwdFeatureArgs, Sm80BwdArgs>>;

// Preprocess: one warp per (b, h, row) of sq_pad rows.
struct Sm80BwdPreArgs {
  detail::ConstTensor4 dout, o;
  const float* lse = nullptr;  // (B, Hq, sq), natural log
  float* lse_log2 = nullptr;
  float* dsum = nullptr;
  // The dQ accumulator, zeroed here row by row (acc_cols floats a row: the kernel's head dim)
  // instead of by a memset of its own, as the varlen preprocess does: the writes overlap the
  // O / dO reads.
  float* dq_zero = nullptr;
  int b = 0, hq = 0, sq = 0, sq_pad = 0, d_v = 0, acc_cols = 0;
};

// Varlen preprocess / postprocess: one CTA per (head, padded block) of the scratch
// (common/varlen_layout.h); rows of no sequence get lse_log2 = +inf and dsum = 0, and no dq.
struct Sm80BwdVarlenPrepostArgs {
  detail::ConstTensor4 dout, o;  // (1, total_q, Hq, Dv) views
  detail::Tensor4 dq;            // (1, total_q, Hq, D)
  const float* lse = nullptr;    // (Hq, total_q), natural log
  float* lse_log2 = nullptr;
  float* dsum = nullptr;
  const float* dq_accum = nullptr;
  float* dq_zero = nullptr;  // preprocess: the same accumulator, zeroed block by block
  const int* cu_q = nullptr;
  int num_seqs = 0, max_q = 0, total_q = 0, hq = 0, d = 0, d_v = 0;
  int64_t num_blocks = 0;  // padded blocks per head
  float scale = 0.f;
};

// Postprocess: dq = scale * accumulator, into the caller's strided dq (d columns of kHeadDim).
struct Sm80BwdPostArgs {
  const float* dq_accum = nullptr;
  detail::Tensor4 dq;
  int b = 0, hq = 0, sq = 0, sq_pad = 0, d = 0;
  float scale = 0.f;
};

}  // namespace flashattn::sm80
