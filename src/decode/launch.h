// Host side of the KV-cache attention for one (covering head dim, dtype): the split plan, the
// stream-ordered scratch of a split call, the attention kernel and the combine. Included by the
// instantiation files only.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "common/device_info.h"
#include "common/scratch.h"
#include "decode/config.h"
#include "decode/kernel.h"
#include "decode/kernel_args.h"
#include "decode/launchers.h"
#include "decode/split_heuristic.h"

namespace flashattn::decode {

// CTAs of `kernel` one SM holds at once on device `dev`: asked once per device (an occupancy
// query is host work we do not want on every decode step), cached for the process.
template <class Kernel>
int resident_ctas(Kernel kernel, int threads, int smem, int dev) {
  static std::atomic<int> cache[detail::DeviceInfoCache::kMaxDevices] = {};
  const bool cached = dev >= 0 && dev < detail::DeviceInfoCache::kMaxDevices;
  if (cached) {
    const int v = cache[dev].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return 1;  // a plan for one CTA per SM is still correct
  }
  if (cached) cache[dev].store(n, std::memory_order_relaxed);
  return n;
}

template <int kHeadDim, bool kBf16>
Status run_kvcache_attention(const detail::KvCacheParams& p, cudaStream_t stream) {
  using Cfg = DecodeConfig<kHeadDim>;
  auto* kernel = &kvcache_attn_kernel<Cfg, kBf16>;
  DecodeArgs args;
  args.p = p;
  args.rows = int64_t(p.b) * p.hq * p.sq;
  if (args.rows == 0) return Status::Ok();
  args.m_tiles = (p.sq * p.h_ratio + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t ctas = int64_t(p.b) * p.hkv * args.m_tiles;

  // Raising the opt-in limit is cheap and per device: every call, so several GPUs work.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (e != cudaSuccess)
    return {StatusCode::kCudaError, std::string("kvcache: cannot set shared memory size: ") + cudaGetErrorString(e)};

  if (p.num_splits > 0) {
    args.splits = p.num_splits < kMaxSplits ? p.num_splits : kMaxSplits;
  } else {
    detail::DeviceInfo info;
    const Status st = detail::current_device_info(&info);
    if (!st.ok()) return st;
    const int64_t slots = int64_t(info.sm_count) * resident_ctas(kernel, Cfg::kThreads, Cfg::kSmemBytes, info.index);
    // Longest sequence the call can have: exact when every sequence has cache_seqlen keys,
    // else the cache's capacity (the lengths live on the device; no host sync to read them).
    int64_t keys = p.sk;
    if (p.cache_seqlens == nullptr) {
      const int64_t c = p.cache_seqlen < 0 ? 0 : (p.cache_seqlen > p.sk ? p.sk : p.cache_seqlen);
      keys = c + p.s_new < p.sk ? c + p.s_new : p.sk;
    }
    args.splits = choose_num_splits(ctas, slots, (keys + Cfg::kBlockN - 1) / Cfg::kBlockN);
  }
  const int64_t grid = ctas * args.splits;
  if (grid > 0x7fffffff) return {StatusCode::kNotSupported, "kvcache: grid too large (b * hkv * row tiles * splits)"};

  detail::StreamScratch scratch;  // freed on the stream after the combine
  if (args.splits > 1) {
    const size_t o_bytes = (size_t(args.splits) * size_t(args.rows) * size_t(p.d_v) * 4 + 255) & ~size_t{255};
    const size_t lse_bytes = size_t(args.splits) * size_t(args.rows) * 4;
    if (!scratch.allocate(o_bytes + lse_bytes, stream))
      return {StatusCode::kCudaError,
              "kvcache: cannot allocate " + std::to_string(o_bytes + lse_bytes) + " bytes of split scratch"};
    args.o_part = static_cast<float*>(scratch.get());
    args.lse_part = reinterpret_cast<float*>(static_cast<char*>(scratch.get()) + o_bytes);
  }
  kernel<<<static_cast<unsigned>(grid), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args);
  Status st = launch_status("attention kernel launch");
  if (!st.ok() || args.splits == 1) return st;
  return launch_combine(args, stream);
}

}  // namespace flashattn::decode
