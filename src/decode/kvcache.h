// KV-cache attention (FlashAttention 2's flash_attn_with_kvcache; decode): the entry the API
// layer calls with a validated detail::KvCacheParams.
#pragma once

#include <cuda_runtime_api.h>

#include "common/params.h"
#include "flashattn/flashattn.h"

namespace flashattn::detail {

// Appends k_new / v_new (s_new > 0) into the cache in place at each sequence's cache_seqlens,
// then runs q over the first cache_seqlens + s_new keys of each sequence, writing out and lse
// (when non-null). Everything is enqueued on `stream`: no host synchronization, no host work
// that grows with the batch (CUDA-graph capturable; split scratch is stream-ordered).
// Precondition: p validated (shapes, strides in multiples of 16 bytes, 16-B aligned pointers,
// d and d_v multiples of 8 up to 256, page_size a multiple of 16), current device cc >= 8.0.
// Device-side, lengths and page indices are clamped so bad metadata cannot read or write out
// of bounds (see decode/kernel_args.h seq_lens and decode/append.cu).
Status kvcache_forward(const KvCacheParams& p, cudaStream_t stream);

}  // namespace flashattn::detail
