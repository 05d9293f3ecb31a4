// Host side of one varlen backward configuration (bwd/varlen.h): the padded packed scratch,
// preprocess, the main kernel over (key blocks of max_seqlen_k, kv heads, sequences),
// postprocess. No host sync and no host work per sequence: the offsets stay on the device.
// Included only by bwd/instantiations/bwd_varlen_*.cu.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "api/backends.h"
#include "common/scratch.h"
#include "sm90/bwd/config.h"
#include "sm90/bwd/kernel_varlen.h"
#include "sm90/bwd/launch.h"
#include "sm90/bwd/prepost.h"
#include "sm90/bwd/varlen.h"
#include "sm90/smem_opt_in.h"
#include "sm90/tma_host.h"

namespace flashattn::sm90 {

template <class Cfg, class Elem>
Status launch_bwd_varlen(const detail::BwdParams& p, cudaStream_t stream) {
  using flashattn::StatusCode;
  static_assert(Cfg::kVarlen);
  // p.sq / p.sk: the max lengths (>= 1: calls without queries or keys are empty, api/backward.cpp).
  const int64_t num_blocks = VarlenLayout<Cfg::kBlockM>::num_blocks(p.total_q, p.b);
  const int turn_m = (p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int num_n = (p.sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const size_t rows = static_cast<size_t>(p.hq) * num_blocks * Cfg::kBlockM;
  const size_t chunks = static_cast<size_t>(p.hq) * num_blocks;
  detail::BwdScratch ws(rows, chunks * Cfg::kBlockM * Cfg::kHeadDim,
                        p.deterministic ? static_cast<size_t>(p.b) * p.hq * turn_m : 0);
  detail::StreamScratch scratch;
  // The preprocess zeroes the accumulator's blocks (one CTA per padded block, only blocks of a
  // sequence): no memset of the whole padded accumulator.
  if (Status st = detail::acquire_bwd_scratch(ws, scratch, stream, "backend sm90 backward (varlen)", /*zero_dq=*/false);
      !st.ok())
    return st;

  BwdVarlenPrepostArgs pp;
  pp.dout = p.dout;
  pp.o = p.o;
  pp.lse = p.lse;
  pp.lse_log2 = ws.lse_log2;
  pp.dsum = ws.dsum;
  pp.dq_accum = ws.dq_accum;
  pp.dq_zero = ws.dq_accum;
  pp.dq = p.dq;
  pp.cu_q = p.cu_q;
  pp.num_seqs = p.b;
  pp.max_q = p.sq;
  pp.total_q = p.total_q;
  pp.hq = p.hq;
  pp.num_blocks = num_blocks;
  // The packed tensors as one batch: rows past total_q / total_k come in as zeros (TMA), rows of
  // other sequences are zeroed in shared memory by the kernel.
  // The batch stride of a (1, rows, H, D) view is never used, but TMA (and rows_16b_aligned)
  // wants a legal one.
  auto one_batch = [](auto t, int rows) {
    t.sb = static_cast<int64_t>(rows > 0 ? rows : 1) * t.ss;
    return t;
  };
  pp.d = p.d_v;  // dsum = rowsum(dO * O) over O's columns
  pp.scale = p.scale;
  pp.vec = rows_16b_aligned(one_batch(p.o, p.total_q)) && rows_16b_aligned(one_batch(p.dout, p.total_q));
  sm90_bwd_preprocess_varlen<Cfg, Elem><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(pp);
  Status s = detail::check_launch("backend sm90 backward (varlen): preprocess");
  if (!s.ok()) return s;

  const CUtensorMapDataType dt = Cfg::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap tmQ, tmK, tmV, tmDo;
  if (!encode_bshd(&tmQ, one_batch(p.q, p.total_q), dt, 1, p.total_q, p.hq, p.d, Cfg::kBlockM) ||
      !encode_bshd(&tmDo, one_batch(p.dout, p.total_q), dt, 1, p.total_q, p.hq, p.d_v, Cfg::kBlockM) ||
      !encode_bshd(&tmK, one_batch(p.k, p.total_k), dt, 1, p.total_k, p.hkv, p.d, Cfg::kBlockN) ||
      !encode_bshd(&tmV, one_batch(p.v, p.total_k), dt, 1, p.total_k, p.hkv, p.d_v, Cfg::kBlockN))
    return {StatusCode::kInternal, "backend sm90 backward (varlen): cuTensorMapEncodeTiled failed"};

  BwdVarlenArgsOf<Cfg> args;
  // sm90_supports bounds num_blocks * kBlockM to int.
  set_bwd_args(args, p, ws, static_cast<int>(num_blocks * Cfg::kBlockM), static_cast<int>(num_blocks));
  args.cu_q = p.cu_q;
  args.cu_k = p.cu_k;
  args.total_q = p.total_q;
  args.total_k = p.total_k;
  args.turn_m_blocks = turn_m;
  if (s = set_bwd_feature_args<Cfg>(args, p, "backend sm90 backward (varlen)"); !s.ok()) return s;

  auto kernel = sm90_bwd_varlen_kernel<Cfg, Elem>;
  s = opt_in_smem<sm90_bwd_varlen_kernel<Cfg, Elem>>(Cfg::kSmemDynamic, "backend sm90 backward (varlen)");
  if (!s.ok()) return s;
  const dim3 grid = bwd_grid<Cfg>(args, p, num_n);
  kernel<<<grid, Cfg::kNumThreads, Cfg::kSmemDynamic, stream>>>(tmQ, tmK, tmV, tmDo, args);
  s = detail::check_launch("backend sm90 backward (varlen): main kernel");
  if (!s.ok()) return s;

  pp.d = p.d;
  pp.vec = rows_16b_aligned(one_batch(p.dq, p.total_q));
  sm90_bwd_postprocess_varlen<Cfg, Elem><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(pp);
  return detail::check_launch("backend sm90 backward (varlen): postprocess");
}

// Defined in bwd/instantiations/bwd_varlen_d{64,128,256}.cu (kNone and kCausal, fp16 and bf16),
// and the feature kernels' varlen twins (kLocal with run-time softcap and ALiBi).
template <int D, bool Bf16>
Status run_bwd_varlen(const detail::BwdParams& p, cudaStream_t stream);
template <int D, bool Bf16>
Status run_bwd_varlen_feature(const detail::BwdParams& p, cudaStream_t stream);

}  // namespace flashattn::sm90
