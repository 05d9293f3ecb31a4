// The append step of a KV-cache call: k_new / v_new (B, s_new, Hkv, D|Dv) are copied into the
// cache at keys [cache_seqlens[b], cache_seqlens[b] + s_new) of each sequence, in place, before
// the attention kernel runs on the same stream. One warp per (b, t, kv head) row, 16-B vectors
// (rows are multiples of 8 elements, strides multiples of 16 B). Writes nothing else: a key past
// the cache's capacity, or in a page outside the pool, is skipped.
#include <cuda_runtime.h>

#include <cstdint>

#include "decode/kernel_args.h"
#include "decode/launchers.h"

namespace flashattn::decode {
namespace {

constexpr int kAppendWarps = 8;

__global__ void __launch_bounds__(32 * kAppendWarps) kvcache_append_kernel(const __grid_constant__ detail::KvCacheParams p) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t n_rows = int64_t(p.b) * p.s_new * p.hkv;
  const int k_vecs = p.d / 8, vecs = k_vecs + p.d_v / 8;
  for (int64_t row = int64_t(blockIdx.x) * kAppendWarps + (threadIdx.x >> 5); row < n_rows;
       row += int64_t(gridDim.x) * kAppendWarps) {
    const int h = static_cast<int>(row % p.hkv);
    const int64_t bt = row / p.hkv;
    const int t = static_cast<int>(bt % p.s_new), b = static_cast<int>(bt / p.s_new);
    const int j = seq_lens(p, b).cache + t;  // the key this row becomes
    if (j >= p.sk) continue;                 // past the capacity: dropped
    int64_t page = b, prow = j;
    if (p.block_table != nullptr) {
      const int e = p.block_table[int64_t(b) * p.block_table_stride + j / p.page_size];
      if (e < 0 || e >= p.num_pages) continue;  // no such page: nothing written
      page = e;
      prow = j % p.page_size;
    }
    const uint4* ks = reinterpret_cast<const uint4*>(static_cast<const char*>(p.k_new.ptr) +
                                                     2 * (b * p.k_new.sb + t * p.k_new.ss + h * p.k_new.sh));
    const uint4* vs = reinterpret_cast<const uint4*>(static_cast<const char*>(p.v_new.ptr) +
                                                     2 * (b * p.v_new.sb + t * p.v_new.ss + h * p.v_new.sh));
    uint4* kd = reinterpret_cast<uint4*>(static_cast<char*>(p.k_cache.ptr) +
                                         2 * (page * p.k_cache.sb + prow * p.k_cache.ss + h * p.k_cache.sh));
    uint4* vd = reinterpret_cast<uint4*>(static_cast<char*>(p.v_cache.ptr) +
                                         2 * (page * p.v_cache.sb + prow * p.v_cache.ss + h * p.v_cache.sh));
    for (int c = lane; c < vecs; c += 32) {
      if (c < k_vecs) kd[c] = ks[c];
      else vd[c - k_vecs] = vs[c - k_vecs];
    }
  }
}

}  // namespace

Status launch_append(const detail::KvCacheParams& p, cudaStream_t stream) {
  const int64_t n_rows = int64_t(p.b) * p.s_new * p.hkv;
  if (n_rows <= 0 || p.k_new.ptr == nullptr || p.v_new.ptr == nullptr) return Status::Ok();
  // Enough CTAs to cover the rows up to a cap; the grid-stride loop takes the rest (a prefill
  // of many tokens), so the grid stays within limits and the host work stays constant.
  const int64_t want = (n_rows + kAppendWarps - 1) / kAppendWarps;
  const unsigned grid = static_cast<unsigned>(want < 65536 ? want : 65536);
  kvcache_append_kernel<<<grid, 32 * kAppendWarps, 0, stream>>>(p);
  return launch_status("append kernel launch");
}

}  // namespace flashattn::decode
