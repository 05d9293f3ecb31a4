// Host side of one sm80 varlen backward configuration: the padded packed scratch
// (common/varlen_layout.h), preprocess, the main kernel over (key blocks of max_seqlen_k, kv heads,
// sequences), postprocess. No host sync and no host work per sequence: the offsets stay on the
// device. Included only by bwd/instantiations/bwd_d*_varlen.cu.
#pragma once

#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

template <class Cfg, class Elem, MaskKind Kind>
Status launch_bwd_varlen(const detail::BwdParams& p, cudaStream_t stream) {
  static_assert(Cfg::kVarlen);
  // p.sq / p.sk: the max lengths (>= 1: calls without queries or keys are empty, api/backward.cpp).
  const int64_t num_blocks = detail::VarlenLayout<Cfg::kBlockM>::num_blocks(p.total_q, p.b);
  const int turn_m = (p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int num_n = (p.sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const size_t chunks = static_cast<size_t>(p.hq) * num_blocks;
  const size_t rows = chunks * Cfg::kBlockM;
  detail::BwdScratch ws(rows, rows * Cfg::kHeadDim, p.deterministic ? static_cast<size_t>(p.b) * p.hq * turn_m : 0);
  detail::StreamScratch scratch;
  // The preprocess zeroes the accumulator's blocks of a sequence: no memset of the padded whole.
  if (Status st = detail::acquire_bwd_scratch(ws, scratch, stream, "backend sm80 backward (varlen)", /*zero_dq=*/false);
      !st.ok())
    return st;

  Sm80BwdVarlenPrepostArgs pp;
  pp.dout = p.dout;
  pp.o = p.o;
  pp.dq = p.dq;
  pp.lse = p.lse;
  pp.lse_log2 = ws.lse_log2;
  pp.dsum = ws.dsum;
  pp.dq_accum = ws.dq_accum;
  pp.dq_zero = ws.dq_accum;
  pp.cu_q = p.cu_q;
  pp.num_seqs = p.b;
  pp.max_q = p.sq;
  pp.total_q = p.total_q;
  pp.hq = p.hq;
  pp.d = p.d;
  pp.d_v = p.d_v;
  pp.num_blocks = num_blocks;
  pp.scale = p.scale;
  sm80_bwd_preprocess_varlen<Cfg::kBlockM, Cfg::kHeadDim, Elem><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(pp);
  Status s = detail::check_launch("backend sm80 backward (varlen): preprocess");
  if (!s.ok()) return s;

  Sm80BwdArgsOf<Kind, true> a{};
  // sm80_supports bounds num_blocks * kBlockM to int.
  if (Status st = set_bwd_args<Kind>(a, p, ws, static_cast<int>(num_blocks * Cfg::kBlockM), turn_m); !st.ok())
    return st;
  a.cu_q = p.cu_q;
  a.cu_k = p.cu_k;
  a.total_q = p.total_q;
  a.total_k = p.total_k;
  s = launch_bwd_main<Cfg, Elem, Kind>(a, dim3(num_n, p.hkv, p.b), stream);
  if (!s.ok()) return s;

  if constexpr (Cfg::kDqFragOrder)
    sm80_bwd_postprocess_varlen_frag<Cfg, Elem><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(pp);
  else
    sm80_bwd_postprocess_varlen<Cfg::kBlockM, Cfg::kHeadDim, Elem><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(pp);
  return detail::check_launch("backend sm80 backward (varlen): postprocess");
}

}  // namespace flashattn::sm80
