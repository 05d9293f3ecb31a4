// Host side of one configuration: tensor maps, grid, smem opt-in, launch. Included only by
// instantiations/*.cu so each head dim compiles in its own translation unit.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>

#include "api/backends.h"
#include "sm90/fwd/kernel.h"
#include "sm90/fwd/stream_k_host.h"
#include "sm90/fwd/tile_table.h"
#include "sm90/tma_host.h"
#include "sm90/fwd/trace_host.h"
#include "sm90/smem_opt_in.h"
#include "sm90/workspace.h"

namespace flashattn::sm90 {

template <class Cfg>
Status launch_fwd(const detail::FwdParams& p, cudaStream_t stream) {
  using flashattn::StatusCode;
  constexpr bool kCausal = Cfg::kMaskKind == MaskKind::kCausal;
  if (!Cfg::kLocal && (kCausal != p.causal || p.has_window()))
    return {StatusCode::kInternal, "backend sm90: the kernel's mask kind differs from the call's"};
  if (!Cfg::kSoftcap && p.softcap > 0.f) return {StatusCode::kInternal, "backend sm90: softcap on a kernel without it"};
  const CUtensorMapDataType dt = Cfg::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (Cfg::kVarlen != p.varlen()) return {StatusCode::kInternal, "backend sm90: varlen kernel and call differ"};
  CUtensorMap tmQ, tmK, tmV, tmO{};
  // Varlen: the packed tensors are one batch of total_q (total_k) rows; the batch stride of a
  // one-batch map is never stepped, any positive multiple of 16 bytes does.
  const int map_b = Cfg::kVarlen ? 1 : p.b;
  const int map_sq = Cfg::kVarlen ? p.total_q : p.sq, map_sk = Cfg::kVarlen ? p.total_k : p.sk;
  auto one_batch = [](auto t, int rows) {
    if (Cfg::kVarlen) t.sb = static_cast<int64_t>(rows > 0 ? rows : 1) * t.ss;
    return t;
  };
  // A zero stride (broadcast) is legal for our params but not for TMA; callers hit supports() first.
  constexpr int kSw = Cfg::kSwizzleBytes;
  if (!encode_bshd(&tmQ, one_batch(p.q, map_sq), dt, map_b, map_sq, p.hq, p.d, Cfg::kBlockM, kSw) ||
      !encode_bshd(&tmK, one_batch(p.k, map_sk), dt, map_b, map_sk, p.hkv, p.d, Cfg::kBlockN, kSw) ||
      !encode_bshd(&tmV, one_batch(p.v, map_sk), dt, map_b, map_sk, p.hkv, p.d_v, Cfg::kBlockN, kSw))
    return {StatusCode::kInternal, "backend sm90: cuTensorMapEncodeTiled failed"};

  Sm90FwdArgs args{};
  args.o = p.o.ptr;
  args.lse = p.lse;
  args.o_sb = p.o.sb;
  args.o_ss = p.o.ss;
  args.o_sh = p.o.sh;
  args.d_v = p.d_v;
  args.sq = p.sq;
  args.sk = p.sk;
  args.hq = p.hq;
  args.b = p.b;
  args.div_h_ratio = FastDiv(p.h_ratio);
  args.cu_q = p.cu_q;
  args.cu_k = p.cu_k;
  args.total_q = p.total_q;
  args.total_k = p.total_k;
  const int num_m_blocks = (p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  args.scale_log2 = p.scale_log2;
  if constexpr (Cfg::kLocal) {
    const Mask<MaskKind::kLocal> w = make_local_mask(p.sq, p.sk, p.window_left, p.window_right, p.causal);
    args.window_left = w.left;
    args.window_right = w.right;
  }
  args.softcap_scale = 0.f;
  args.alibi = Cfg::kSoftcap ? p.alibi_slopes : nullptr;
  args.alibi_bstride = p.alibi_batch_stride;
  if (!Cfg::kSoftcap && p.alibi_slopes != nullptr) return {StatusCode::kInternal, "backend sm90: ALiBi on a kernel without it"};
  if constexpr (Cfg::kSoftcap) {
    args.softcap_scale = softcap_scale_arg(p);  // negative: Consumer::bounded_max
    args.scale_log2 = p.exp2_scale();  // the softmax runs on softcap * tanh(.) under softcap
  }
  // TMA store of O: needs a 16-byte aligned base and strides (else the direct-store epilogue).
  args.o_tma = false;
  if constexpr (Cfg::kTmaStoreEpilogue) {
    const auto o = one_batch(p.o, map_sq);
    const bool aligned = reinterpret_cast<uintptr_t>(o.ptr) % 16 == 0 && o.ss > 0 && o.ss % 8 == 0 &&
                         o.sh > 0 && o.sh % 8 == 0 && o.sb > 0 && o.sb % 8 == 0;
    args.o_tma = aligned && encode_bshd(&tmO, o, dt, map_b, map_sq, p.hq, p.d_v, 64, kSw);
  }

  auto kernel = sm90_fwd_kernel<Cfg>;
  if (Status s = opt_in_smem<sm90_fwd_kernel<Cfg>>(Cfg::kDynamicSmemBytes, "backend sm90"); !s.ok()) return s;
  const long long tiles = (long long)num_m_blocks * p.hq * p.b;
  if (tiles > INT32_MAX) return {StatusCode::kNotSupported, "backend sm90: more than 2^31 tiles"};
  // FLASHATTN_SM90_TILE_ORDER=0 in the environment keeps causal tiles in the pre-V15 order (A/B).
  args.order = TileOrder::make(num_m_blocks, p.hq, p.b, p.sk, (p.d + p.d_v) / 2,  // K and V bytes per key
                               (kCausal || Cfg::kLocal) && !Cfg::kVarlen && env_switch_on("FLASHATTN_SM90_TILE_ORDER"));
  if (tiles == 0) return Status::Ok();
  int grid = (int)tiles;
  // Scheduling mode (scheduler.h). Causal tiles differ in cost: static striding lost to one CTA
  // per tile (620 vs 668 TFLOPS at S=16k, D=128), the atomic counter beats both (396 vs 344 at
  // S=1k). Non-causal: dynamic measured equal or +1% over static; one path for both.
  // D=256 causal at long S measured faster with one CTA per tile (V6, reason not yet understood).
  constexpr int kOneCtaFrom = causal_one_cta_per_tile_seqlen(Cfg::kHeadDim);
  const int causal_mode = FLASHATTN_SM90_ABL_SCHED_CAUSAL >= 0 ? FLASHATTN_SM90_ABL_SCHED_CAUSAL
                          : (kOneCtaFrom > 0 && p.sq >= kOneCtaFrom) ? 0 : 2;
  // Varlen: the persistent dynamic grid always (one CTA per tile would launch a CTA for every
  // empty tile past a short sequence; work_plan.h skips them in dynamic mode).
  const int mode = Cfg::kVarlen ? 2 : (kCausal || Cfg::kLocal) ? causal_mode : FLASHATTN_SM90_ABL_SCHED_NONCAUSAL;
  args.tile_counter = nullptr;
  // No split: every tile whole. Stream-K configs take every tile's key range from the plan.
  const int n_blocks = (p.sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  args.plan = StreamKPlan::make(tiles, 0, n_blocks);
  args.sk_counters = nullptr;
  args.sk_partials = nullptr;
  void* graph_workspace = nullptr;
  if (Cfg::kPersistent && mode >= 1) {
    if constexpr (Cfg::kStreamK) graph_workspace = setup_stream_k<Cfg>(args, tiles, n_blocks, current_num_sms(), stream);
    grid = (int)std::min<long long>(args.plan.num_items(), current_num_sms());
    if (mode == 2) args.tile_counter = next_tile_counter(stream);  // null (static) if unavailable
  }
#if FLASHATTN_SM90_TRACE
  const size_t trace_words = static_cast<size_t>(grid) * kTraceEvents * 4;
  cudaMalloc(&args.trace, trace_words * 8);
  cudaMemset(args.trace, 0, trace_words * 8);
#endif
  kernel<<<grid, Cfg::kNumThreads, Cfg::kDynamicSmemBytes, stream>>>(tmQ, tmK, tmV, tmO, args);
  if (graph_workspace != nullptr) cudaFreeAsync(graph_workspace, stream);
#if FLASHATTN_SM90_TRACE
  dump_trace(args.trace, grid, args.plan, p);
#endif
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return {StatusCode::kCudaError, std::string("backend sm90: launch: ") + cudaGetErrorString(err)};
  return Status::Ok();
}

// Defined in instantiations/fwd_d{64,96,128,192,256}.cu and fwd_varlen_d*.cu.
template <int D, bool Bf16>
Status run_fwd(const detail::FwdParams& p, cudaStream_t stream);
template <int D, bool Bf16>
Status run_fwd_varlen(const detail::FwdParams& p, cudaStream_t stream);
// Dense calls with q/k 136..192 and v <= 128 (fwd_d192_v128.cu; head_dim.h's rule).
template <bool Bf16>
Status run_fwd_192_128(const detail::FwdParams& p, cudaStream_t stream);
// Calls with a sliding window, a softcap or ALiBi (fwd_feature_d*.cu): one kLocal kernel with
// the softcap and ALiBi switches per head dim and dtype (a causal call is the window (unbounded,
// 0)), and its varlen twin.
template <int D, bool Bf16>
Status run_fwd_feature(const detail::FwdParams& p, cudaStream_t stream);

// Dense calls with a softcap or ALiBi and no window, D=64 and D=128 (fwd_score_mod_d*.cu):
// the dense entries with the softcap and ALiBi switches.
template <int D, bool Bf16>
Status run_fwd_score_mod(const detail::FwdParams& p, cudaStream_t stream);

// Dense calls with a window and neither softcap nor ALiBi, D=64 and D=128 (fwd_window_d*.cu).
template <int D, bool Bf16>
Status run_fwd_window(const detail::FwdParams& p, cudaStream_t stream);

// Picks a table's configuration for the mask and length; `Table` is tile_table, varlen_table
// or score_mod_table (tile_table.h). Identical choices collapse into one instantiation (same
// Sm90FwdConfig type).
template <auto Table, int D, bool Bf16>
Status run_fwd_table_any_mask(const detail::FwdParams& p, cudaStream_t stream) {
  if (!p.causal) return launch_fwd<Sm90FwdConfig<Table(D, Bf16, false, false)>>(p, stream);
  if constexpr (Table(D, Bf16, true, true) != Table(D, Bf16, true, false)) {
    if (p.sq < short_causal_seqlen(D)) return launch_fwd<Sm90FwdConfig<Table(D, Bf16, true, true)>>(p, stream);
  }
  return launch_fwd<Sm90FwdConfig<Table(D, Bf16, true, false)>>(p, stream);
}

template <int D, bool Bf16>
Status run_fwd_any_mask(const detail::FwdParams& p, cudaStream_t stream) {
  return run_fwd_table_any_mask<tile_table, D, Bf16>(p, stream);
}

// Varlen tiles go one (sequence, head) pair at a time (no L2 grouping: measured equal on
// causal 2 x 8k, D=128, and it lets work_plan.h skip a short sequence's empty tiles); the
// short-causal entry when the longest query sequence is short, as the dense dispatch does.
template <int D, bool Bf16>
Status run_fwd_varlen_any_mask(const detail::FwdParams& p, cudaStream_t stream) {
  return run_fwd_table_any_mask<varlen_table, D, Bf16>(p, stream);
}

template <int D, bool Bf16>
Status run_fwd_feature_config(const detail::FwdParams& p, cudaStream_t stream) {
  if (p.varlen()) return launch_fwd<FeatureVarlenConfig<D, Bf16>>(p, stream);
  return launch_fwd<FeatureConfig<D, Bf16>>(p, stream);
}

// The dense entry's mask and length choice on the score-mod twins.
template <int D, bool Bf16>
Status run_fwd_score_mod_any_mask(const detail::FwdParams& p, cudaStream_t stream) {
  return run_fwd_table_any_mask<score_mod_table, D, Bf16>(p, stream);
}

template <int D, bool Bf16>
Status run_fwd_window_config(const detail::FwdParams& p, cudaStream_t stream) {
  return launch_fwd<Sm90FwdConfig<window_table(D, Bf16)>>(p, stream);
}

}  // namespace flashattn::sm90
