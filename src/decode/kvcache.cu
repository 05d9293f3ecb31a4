// kvcache_forward: the append, then the attention on the kernel whose head dim covers both d
// and d_v (64, 128 or 256; the columns in between are zero-filled on load and never written).
#include "decode/kvcache.h"

#include "common/head_dim.h"
#include "decode/launchers.h"

namespace flashattn::detail {

Status kvcache_forward(const KvCacheParams& p, cudaStream_t stream) {
  if (p.s_new > 0) {
    const Status st = decode::launch_append(p, stream);
    if (!st.ok()) return st;
  }
  constexpr int kDims[] = {64, 128, 256};
  const bool bf16 = p.dtype == ElemType::kBFloat16;
  switch (covering_head_dim(kDims, p.d, p.d_v)) {
    case 64: return bf16 ? decode::run_kvcache_attention<64, true>(p, stream) : decode::run_kvcache_attention<64, false>(p, stream);
    case 128: return bf16 ? decode::run_kvcache_attention<128, true>(p, stream) : decode::run_kvcache_attention<128, false>(p, stream);
    case 256: return bf16 ? decode::run_kvcache_attention<256, true>(p, stream) : decode::run_kvcache_attention<256, false>(p, stream);
    default: return {StatusCode::kNotSupported, "kvcache: head dims d and d_v must be at most 256"};
  }
}

}  // namespace flashattn::detail
