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
#include "sm90/fwd/trace_host.h"
#include "sm90/workspace.h"

namespace flashattn::sm90 {

// cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult st{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &st) !=
            cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// (B, S, H, D) tensor with element strides (sb, ss, sh, 1) as a 4-D map {D, S, H, B}; boxes of
// 64 x rows (one 128 B swizzle span wide). Out-of-bounds rows read as zero.
inline bool encode_bshd(CUtensorMap* map, const void* ptr, CUtensorMapDataType dt, int b, int s, int h, int d,
                        int64_t sb, int64_t ss, int64_t sh, int box_rows) {
  const cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)s, (cuuint64_t)h, (cuuint64_t)b};
  const cuuint64_t strides[3] = {(cuuint64_t)ss * 2, (cuuint64_t)sh * 2, (cuuint64_t)sb * 2};
  const cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  auto enc = tensor_map_encoder();
  if (enc == nullptr) return false;
  return enc(map, dt, 4, const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// SM count of the current device (cached per device; persistent grids size to it).
inline int num_sms() {
  static int cache[64] = {};
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev < 0 || dev >= 64) dev = 0;
  if (cache[dev] == 0) {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    cache[dev] = n > 0 ? n : 1;
  }
  return cache[dev];
}

// Scheduling modes: 0 one CTA per tile, 1 static persistent, 2 dynamic persistent.
#ifndef FLASHATTN_SM90_SCHED_NONCAUSAL
#define FLASHATTN_SM90_SCHED_NONCAUSAL 2
#endif
// Causal default (-1): dynamic, except one CTA per tile from the table's
// kCausalOneCtaPerTileSeqLen on (D=256, see config.h).
#ifndef FLASHATTN_SM90_SCHED_CAUSAL
#define FLASHATTN_SM90_SCHED_CAUSAL -1
#endif

// Tile counters for dynamic scheduling: a per-device pool of zeroed {next, finished} pairs,
// handed out round-robin so launches in flight on different streams use different pairs (each
// pair is zero again when its kernel ends). Null if the pool cannot be allocated (e.g. during
// stream capture in global mode); the kernel then strides statically.
inline int* next_tile_counter(cudaStream_t stream) {
  constexpr int kPairs = 256;
  static std::mutex mu;
  static int* pools[64] = {};
  static unsigned next[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (pools[dev] == nullptr) {
    // First use allocates and zeroes synchronously; not allowed while capturing a graph.
    if (!can_allocate_now(stream)) return nullptr;
    pools[dev] = static_cast<int*>(alloc_zeroed(kPairs * 2 * sizeof(int)));
    if (pools[dev] == nullptr) return nullptr;
  }
  return pools[dev] + 2 * (next[dev]++ % kPairs);
}

template <class Cfg>
Status launch_fwd(const detail::FwdParams& p, cudaStream_t stream) {
  using flashattn::StatusCode;
  const CUtensorMapDataType dt = Cfg::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap tmQ, tmK, tmV, tmO{};
  // A zero stride (broadcast) is legal for our params but not for TMA; callers hit supports() first.
  if (!encode_bshd(&tmQ, p.q.ptr, dt, p.b, p.sq, p.hq, p.d, p.q.sb, p.q.ss, p.q.sh, Cfg::kBlockM) ||
      !encode_bshd(&tmK, p.k.ptr, dt, p.b, p.sk, p.hkv, p.d, p.k.sb, p.k.ss, p.k.sh, Cfg::kBlockN) ||
      !encode_bshd(&tmV, p.v.ptr, dt, p.b, p.sk, p.hkv, p.d, p.v.sb, p.v.ss, p.v.sh, Cfg::kBlockN))
    return {StatusCode::kInternal, "backend sm90: cuTensorMapEncodeTiled failed"};

  Sm90FwdArgs args{};
  args.o = p.o.ptr;
  args.lse = p.lse;
  args.o_sb = p.o.sb;
  args.o_ss = p.o.ss;
  args.o_sh = p.o.sh;
  args.sq = p.sq;
  args.sk = p.sk;
  args.hq = p.hq;
  args.b = p.b;
  args.div_h_ratio = FastDiv(p.h_ratio);
  const int num_m_blocks = (p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  args.scale_log2 = p.scale_log2;
  args.causal = p.causal;
  // TMA store of O: needs a 16-byte aligned base and strides (else the direct-store epilogue).
  args.o_tma = false;
  if constexpr (Cfg::kTmaStoreEpilogue) {
    const bool aligned = reinterpret_cast<uintptr_t>(p.o.ptr) % 16 == 0 && p.o.ss > 0 && p.o.ss % 8 == 0 &&
                         p.o.sh > 0 && p.o.sh % 8 == 0 && p.o.sb > 0 && p.o.sb % 8 == 0;
    args.o_tma = aligned && encode_bshd(&tmO, p.o.ptr, dt, p.b, p.sq, p.hq, p.d, p.o.sb, p.o.ss, p.o.sh, 64);
  }

  auto kernel = sm90_fwd_kernel<Cfg>;
  static std::once_flag once;
  static cudaError_t attr_err = cudaSuccess;
  std::call_once(once, [&] {
    attr_err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kDynamicSmemBytes);
  });
  if (attr_err != cudaSuccess)
    return {StatusCode::kCudaError, std::string("backend sm90: cudaFuncSetAttribute: ") + cudaGetErrorString(attr_err)};
  const long long tiles = (long long)num_m_blocks * p.hq * p.b;
  if (tiles > INT32_MAX) return {StatusCode::kNotSupported, "backend sm90: more than 2^31 tiles"};
  // FLASHATTN_SM90_TILE_ORDER=0 in the environment keeps causal tiles in the pre-V15 order (A/B).
  args.order = TileOrder::make(num_m_blocks, p.hq, p.b, p.sk, p.d,
                               p.causal && env_switch_on("FLASHATTN_SM90_TILE_ORDER"));
  if (tiles == 0) return Status::Ok();
  int grid = (int)tiles;
  // Scheduling mode (scheduler.h). Causal tiles differ in cost: static striding lost to one CTA
  // per tile (620 vs 668 TFLOPS at S=16k, D=128), the atomic counter beats both (396 vs 344 at
  // S=1k). Non-causal: dynamic measured equal or +1% over static; one path for both.
  // D=256 causal at long S measured faster with one CTA per tile (V6, reason not yet understood).
  constexpr int kOneCtaFrom = Sm90TileTable<Cfg::kHeadDim>::kCausalOneCtaPerTileSeqLen;
  const int causal_mode = FLASHATTN_SM90_SCHED_CAUSAL >= 0 ? FLASHATTN_SM90_SCHED_CAUSAL
                          : (kOneCtaFrom > 0 && p.sq >= kOneCtaFrom) ? 0 : 2;
  const int mode = p.causal ? causal_mode : FLASHATTN_SM90_SCHED_NONCAUSAL;
  args.tile_counter = nullptr;
  // No split: every tile whole. Stream-K configs take every tile's key range from the plan.
  const int n_blocks = (p.sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  args.plan = StreamKPlan::make(tiles, 0, n_blocks);
  args.sk_counters = nullptr;
  args.sk_partials = nullptr;
  if (Cfg::kStreamK && p.causal) return {StatusCode::kInternal, "backend sm90: a stream-K (non-causal) kernel got a causal call"};
  void* graph_workspace = nullptr;
  if (Cfg::kPersistent && mode >= 1) {
    if constexpr (Cfg::kStreamK) graph_workspace = setup_stream_k<Cfg>(args, tiles, n_blocks, num_sms(), stream);
    grid = (int)std::min<long long>(args.plan.num_items(), num_sms());
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

// Defined in instantiations/fwd_d{64,128,256}.cu.
template <int D, bool Bf16>
Status run_fwd(const detail::FwdParams& p, cudaStream_t stream);

// Picks the table's configuration for the mask and length. Identical choices collapse into one
// instantiation (same Sm90FwdConfig type).
template <int D, bool Bf16>
Status run_fwd_any_mask(const detail::FwdParams& p, cudaStream_t stream) {
  using T = Sm90TileTable<D>;
  if (!p.causal) return launch_fwd<DefaultConfig<D, Bf16, false>>(p, stream);
  if constexpr (T::kConsumerWarpgroupsShortCausal != T::kConsumerWarpgroups) {
    if (p.sq < T::kShortCausalSeqLen)
      return launch_fwd<DefaultConfig<D, Bf16, true, T::kConsumerWarpgroupsShortCausal>>(p, stream);
  }
  return launch_fwd<DefaultConfig<D, Bf16, true>>(p, stream);
}

}  // namespace flashattn::sm90
