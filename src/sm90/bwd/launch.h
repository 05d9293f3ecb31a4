// Host side of one backward configuration: scratch, preprocess, the main kernel's tensor maps and
// grid, postprocess. Included only by bwd/instantiations/*.cu.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "api/backends.h"
#include "common/scratch.h"
#include "sm90/bwd/config.h"
#include "sm90/bwd/kernel.h"
#include "sm90/bwd/prepost.h"
#include "sm90/smem_opt_in.h"
#include "sm90/tma_host.h"

namespace flashattn::sm90 {

// The arguments every sm90 backward kernel (dense and varlen) takes from the call and the
// scratch; sq_pad / num_m: the row statistics' padded rows and the accumulator's query blocks
// per (batch, head) (dense) or per head (varlen's packed layout).
inline void set_bwd_args(Sm90BwdArgs& args, const detail::BwdParams& p, const detail::BwdScratch& ws, int sq_pad,
                         int num_m) {
  args.lse_log2 = ws.lse_log2;
  args.dsum = ws.dsum;
  args.dq_accum = ws.dq_accum;
  args.dq_turn = ws.turns;
  args.dk = p.dk.ptr;
  args.dv = p.dv.ptr;
  args.dk_sb = p.dk.sb;
  args.dk_ss = p.dk.ss;
  args.dk_sh = p.dk.sh;
  args.dv_sb = p.dv.sb;
  args.dv_ss = p.dv.ss;
  args.dv_sh = p.dv.sh;
  args.sq = p.sq;
  args.sk = p.sk;
  args.hq = p.hq;
  args.hkv = p.hkv;
  args.h_ratio = p.h_ratio;
  args.d = p.d;
  args.d_v = p.d_v;
  args.sq_pad = sq_pad;
  args.num_m_blocks = num_m;
  args.scale = p.scale;
  args.scale_log2 = p.scale_log2;
}

// The feature kernels' window, softcap and ALiBi (kLocal configs; dense and varlen); the other
// kernels refuse calls that set any.
template <class Cfg, class Args>
Status set_bwd_feature_args(Args& args, const detail::BwdParams& p, const char* who) {
  if constexpr (Cfg::kLocal) {
    detail::set_bwd_features(args, p);
  } else {
    if (p.has_features())
      return {StatusCode::kInternal, std::string(who) + ": window / softcap / ALiBi on a kernel without them"};
  }
  return Status::Ok();
}

// Every (b, s, h) row of a 16-bit tensor view starts 16-byte aligned (base and strides).
template <class View>
bool rows_16b_aligned(const View& t) {
  return reinterpret_cast<uintptr_t>(t.ptr) % 16 == 0 && t.sb % 8 == 0 && t.ss % 8 == 0 && t.sh % 8 == 0;
}

// The main kernel's grid: (key blocks, kv heads, batches or sequences), or for causal
// configurations (BwdConfig::kGroupedOrder) outside deterministic mode one dimension in
// args.order: groups of (batch, kv head) pairs whose Q, dO (bf16) and dQ accumulator (fp32) fit in
// TileOrder's L2 budget, 8 * sq * d * h_ratio bytes per pair (varlen: sq the longest sequence).
template <class Cfg, class Args>
dim3 bwd_grid(Args& args, const detail::BwdParams& p, int num_n) {
  if constexpr (Cfg::kGroupedOrder) {
    if (!p.deterministic && static_cast<long long>(num_n) * p.hkv * p.b < (1LL << 31)) {
      args.order = TileOrder::make(num_n, p.hkv, p.b, p.sq, 2 * p.d * p.h_ratio, /*grouped=*/true);
      args.grouped = 1;
      return dim3(static_cast<unsigned>(num_n) * p.hkv * p.b, 1, 1);
    }
  }
  return dim3(num_n, p.hkv, p.b);
}

template <class Cfg, class Elem>
Status launch_bwd(const detail::BwdParams& p, cudaStream_t stream) {
  using flashattn::StatusCode;
  const int num_m = (p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int num_n = (p.sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int sq_pad = num_m * Cfg::kBlockM;
  const size_t rows = static_cast<size_t>(p.b) * p.hq * sq_pad;
  const size_t chunks = static_cast<size_t>(p.b) * p.hq * num_m;
  detail::BwdScratch ws(rows, chunks * Cfg::kBlockM * Cfg::kHeadDim, p.deterministic ? chunks : 0);
  detail::StreamScratch scratch;
  if (Status st = detail::acquire_bwd_scratch(ws, scratch, stream, "backend sm90 backward"); !st.ok()) return st;

  BwdPreArgs pre;
  pre.dout = p.dout;
  pre.o = p.o;
  pre.lse = p.lse;
  pre.lse_log2 = ws.lse_log2;
  pre.dsum = ws.dsum;
  pre.b = p.b;
  pre.hq = p.hq;
  pre.sq = p.sq;
  pre.sq_pad = sq_pad;
  pre.d = p.d_v;  // dsum = rowsum(dO * O) over O's columns
  pre.lanes = bwd_pre_lanes(p.d_v);
  pre.vec = rows_16b_aligned(p.o) && rows_16b_aligned(p.dout);
  sm90_bwd_preprocess<Elem><<<static_cast<unsigned>((rows * pre.lanes + 255) / 256), 256, 0, stream>>>(pre);
  Status s = detail::check_launch("backend sm90 backward: preprocess");
  if (!s.ok()) return s;

  const CUtensorMapDataType dt = Cfg::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap tmQ, tmK, tmV, tmDo;
  if (!encode_bshd(&tmQ, p.q, dt, p.b, p.sq, p.hq, p.d, Cfg::kBlockM) ||
      !encode_bshd(&tmDo, p.dout, dt, p.b, p.sq, p.hq, p.d_v, Cfg::kBlockM) ||
      !encode_bshd(&tmK, p.k, dt, p.b, p.sk, p.hkv, p.d, Cfg::kBlockN) ||
      !encode_bshd(&tmV, p.v, dt, p.b, p.sk, p.hkv, p.d_v, Cfg::kBlockN))
    return {StatusCode::kInternal, "backend sm90 backward: cuTensorMapEncodeTiled failed"};

  BwdArgsOf<Cfg> args;
  set_bwd_args(args, p, ws, sq_pad, num_m);
  if (s = set_bwd_feature_args<Cfg>(args, p, "backend sm90 backward"); !s.ok()) return s;

  auto kernel = sm90_bwd_kernel<Cfg, Elem>;
  s = opt_in_smem<sm90_bwd_kernel<Cfg, Elem>>(Cfg::kSmemDynamic, "backend sm90 backward");
  if (!s.ok()) return s;
  const dim3 grid = bwd_grid<Cfg>(args, p, num_n);
  kernel<<<grid, Cfg::kNumThreads, Cfg::kSmemDynamic, stream>>>(tmQ, tmK, tmV, tmDo, args);
  s = detail::check_launch("backend sm90 backward: main kernel");
  if (!s.ok()) return s;

  BwdPostArgs post;
  post.dq_accum = ws.dq_accum;
  post.dq = p.dq;
  post.b = p.b;
  post.hq = p.hq;
  post.sq = p.sq;
  post.num_m_blocks = num_m;
  post.d = p.d;
  post.scale = p.scale;
  post.vec = rows_16b_aligned(p.dq);
  sm90_bwd_postprocess<Cfg, Elem><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(post);
  return detail::check_launch("backend sm90 backward: postprocess");
}

// Defined in bwd/instantiations/bwd_d{64,128,256}.cu.
template <int D, bool Bf16>
Status run_bwd(const detail::BwdParams& p, cudaStream_t stream);
// Calls with a sliding window, softcap or ALiBi (the feature specialisations in bwd_d{64,128,256}.cu): one kLocal
// kernel per head dim and dtype with run-time softcap / ALiBi (a causal call is the window
// (unbounded, 0)).
template <int D, bool Bf16>
Status run_bwd_feature(const detail::BwdParams& p, cudaStream_t stream);

}  // namespace flashattn::sm90
