// Host side of one sm80 backward configuration: scratch, preprocess, main kernel, postprocess.
// Included only by bwd/instantiations/*.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "api/backends.h"
#include "common/scratch.h"
#include "sm80/bwd/config.h"
#include "sm80/bwd/kernel.h"
#include "sm80/bwd/prepost.h"

namespace flashattn::sm80 {

// The kernel's parameter block from p (dense or varlen; the varlen fields are the caller's):
// sq_pad the scratch rows of one (batch, head) (varlen: of one head), num_m the query blocks
// of one batch (varlen: of the longest sequence; it sizes the deterministic turns).
template <MaskKind Kind, class Args>
Status set_bwd_args(Args& a, const detail::BwdParams& p, const detail::BwdScratch& ws, int sq_pad, int num_m) {
  a.q = p.q.ptr;
  a.k = p.k.ptr;
  a.v = p.v.ptr;
  a.dout = p.dout.ptr;
  a.dk = p.dk.ptr;
  a.dv = p.dv.ptr;
  a.lse_log2 = ws.lse_log2;
  a.dsum = ws.dsum;
  a.dq_accum = ws.dq_accum;
  a.dq_turn = ws.turns;
  a.q_sb = p.q.sb, a.q_ss = p.q.ss, a.q_sh = p.q.sh;
  a.k_sb = p.k.sb, a.k_ss = p.k.ss, a.k_sh = p.k.sh;
  a.v_sb = p.v.sb, a.v_ss = p.v.ss, a.v_sh = p.v.sh;
  a.do_sb = p.dout.sb, a.do_ss = p.dout.ss, a.do_sh = p.dout.sh;
  a.dk_sb = p.dk.sb, a.dk_ss = p.dk.ss, a.dk_sh = p.dk.sh;
  a.dv_sb = p.dv.sb, a.dv_ss = p.dv.ss, a.dv_sh = p.dv.sh;
  a.sq = p.sq;
  a.sk = p.sk;
  a.hq = p.hq;
  a.h_ratio = p.h_ratio;
  a.d = p.d;
  a.d_v = p.d_v;
  a.sq_pad = sq_pad;
  a.num_m_blocks = num_m;
  a.scale = p.scale;
  a.scale_log2 = p.scale_log2;
  if constexpr (Kind == MaskKind::kLocal) {
    detail::set_bwd_features(a, p);
  } else {
    if (p.has_features())
      return {StatusCode::kInternal, "backend sm80 backward: window / softcap / ALiBi on a kernel without them"};
  }
  return Status::Ok();
}

// The main kernel over grid (key blocks, kv heads, batches or sequences).
template <class Cfg, class Elem, MaskKind Kind>
Status launch_bwd_main(const Sm80BwdArgsOf<Kind, Cfg::kVarlen>& a, dim3 grid, cudaStream_t stream) {
  auto* kernel = &sm80_bwd_kernel<Cfg, Elem, Kind>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) != cudaSuccess)
    return detail::check_launch("backend sm80 backward: shared memory opt-in");
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(a);
  return detail::check_launch("backend sm80 backward: main kernel");
}

template <class Cfg, class Elem, MaskKind Kind>
Status launch_bwd(const detail::BwdParams& p, cudaStream_t stream) {
  const int num_m = (p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int num_n = (p.sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int sq_pad = num_m * Cfg::kBlockM;
  const size_t rows = static_cast<size_t>(p.b) * p.hq * sq_pad;
  detail::BwdScratch ws(rows, rows * Cfg::kHeadDim, p.deterministic ? static_cast<size_t>(p.b) * p.hq * num_m : 0);
  detail::StreamScratch scratch;
  // The preprocess zeroes the dQ accumulator (only the turn counters are memset).
  if (Status st = detail::acquire_bwd_scratch(ws, scratch, stream, "backend sm80 backward", /*zero_dq=*/false);
      !st.ok())
    return st;

  Sm80BwdPreArgs pre;
  pre.dout = p.dout;
  pre.o = p.o;
  pre.lse = p.lse;
  pre.lse_log2 = ws.lse_log2;
  pre.dsum = ws.dsum;
  pre.b = p.b;
  pre.hq = p.hq;
  pre.sq = p.sq;
  pre.sq_pad = sq_pad;
  pre.d_v = p.d_v;
  pre.dq_zero = ws.dq_accum;
  pre.acc_cols = Cfg::kHeadDim;
  // Lanes per row by d_v (prepost.h); a 256-thread block covers 256 / lanes rows.
  const int pre_lanes = p.d_v <= 64 ? 8 : p.d_v <= 128 ? 16 : 32;
  auto pre_kernel = pre_lanes == 8    ? &sm80_bwd_preprocess<Elem, 8>
                    : pre_lanes == 16 ? &sm80_bwd_preprocess<Elem, 16>
                                      : &sm80_bwd_preprocess<Elem, 32>;
  const size_t pre_rows_per_block = 256 / pre_lanes;
  pre_kernel<<<static_cast<unsigned>((rows + pre_rows_per_block - 1) / pre_rows_per_block), 256, 0, stream>>>(pre);
  Status s = detail::check_launch("backend sm80 backward: preprocess");
  if (!s.ok()) return s;

  Sm80BwdArgsOf<Kind> a{};
  if (Status st = set_bwd_args<Kind>(a, p, ws, sq_pad, num_m); !st.ok()) return st;

  s = launch_bwd_main<Cfg, Elem, Kind>(a, dim3(num_n, p.hkv, p.b), stream);
  if (!s.ok()) return s;

  Sm80BwdPostArgs post;
  post.dq_accum = ws.dq_accum;
  post.dq = p.dq;
  post.b = p.b;
  post.hq = p.hq;
  post.sq = p.sq;
  post.sq_pad = sq_pad;
  post.d = p.d;
  post.scale = p.scale;
  const size_t vecs = static_cast<size_t>(p.b) * p.hq * p.sq * (p.d / 8);
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((vecs + 255) / 256, 65536));
  if constexpr (Cfg::kDqFragOrder) sm80_bwd_postprocess_frag<Cfg, Elem><<<blocks, 256, 0, stream>>>(post);
  else sm80_bwd_postprocess<Cfg::kHeadDim, Elem><<<blocks, 256, 0, stream>>>(post);
  return detail::check_launch("backend sm80 backward: postprocess");
}

// One head dim's shipped kernels by call: causal or not, deterministic or not (one configuration
// may serve several of the four).
template <class Plain, class PlainDet, class Causal, class CausalDet, class Elem>
Status launch_bwd_by_mode(const detail::BwdParams& p, cudaStream_t stream) {
  if (p.causal)
    return p.deterministic ? launch_bwd<CausalDet, Elem, MaskKind::kCausal>(p, stream)
                           : launch_bwd<Causal, Elem, MaskKind::kCausal>(p, stream);
  return p.deterministic ? launch_bwd<PlainDet, Elem, MaskKind::kNone>(p, stream)
                         : launch_bwd<Plain, Elem, MaskKind::kNone>(p, stream);
}

// Defined in bwd/instantiations/bwd_d{64,128,256}.cu: the shipped configuration of head dim D
// (bwd/config.h), both mask kinds.
template <int D, bool Bf16>
Status run_bwd(const detail::BwdParams& p, cudaStream_t stream);
// Calls with a sliding window, softcap or ALiBi (bwd/instantiations/bwd_d{64,128,256}_feature.cu):
// the plain configuration (d256: kSm80BwdD256Feature, bwd/config.h) with the kLocal mask and
// run-time softcap / ALiBi (a causal call is the window (unbounded, 0)).
template <int D, bool Bf16>
Status run_bwd_feature(const detail::BwdParams& p, cudaStream_t stream);
// The small-shared-memory configurations (bwd/instantiations/bwd_d{64,128,256}_small.cu:
// kSm80BwdD*Small, bwd/config.h), both mask kinds, for devices bwd/select.h puts in the small tier.
template <int D, bool Bf16>
Status run_bwd_small(const detail::BwdParams& p, cudaStream_t stream);
// The small tier's window / softcap / ALiBi kernels (bwd/instantiations/bwd_d*_small_feature.cu:
// kSm80BwdD*SmallFeature with the kLocal mask).
template <int D, bool Bf16>
Status run_bwd_small_feature(const detail::BwdParams& p, cudaStream_t stream);

// Varlen (packed) batches (bwd/instantiations/bwd_d{64,128,256}_varlen.cu, bwd/launch_varlen.h):
// the plain configuration's varlen twin, both mask kinds, and the feature configuration's with the
// kLocal mask for window / softcap / ALiBi.
template <int D, bool Bf16>
Status run_bwd_varlen(const detail::BwdParams& p, cudaStream_t stream);
template <int D, bool Bf16>
Status run_bwd_varlen_feature(const detail::BwdParams& p, cudaStream_t stream);
// The same twins of the small tier's configurations (bwd/instantiations/bwd_d*_small_varlen.cu).
template <int D, bool Bf16>
Status run_bwd_small_varlen(const detail::BwdParams& p, cudaStream_t stream);
template <int D, bool Bf16>
Status run_bwd_small_varlen_feature(const detail::BwdParams& p, cudaStream_t stream);

}  // namespace flashattn::sm80
