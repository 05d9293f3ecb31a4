// What the KV-cache attention and combine kernels receive: the validated call plus the launch's
// split plan and scratch.
#pragma once

#include "common/params.h"

namespace flashattn::decode {

struct DecodeArgs {
  detail::KvCacheParams p;
  int splits = 1;      // key splits per (sequence, KV head, M tile)
  int m_tiles = 1;     // ceil(sq * h_ratio / kBlockM)
  int64_t rows = 0;    // b * hq * sq: output rows (the lse layout's order)
  // splits > 1: per split, O normalized by its own sum (fp32, (splits, rows, d_v)) and its
  // log-sum-exp in log2 units (splits, rows); -inf for a split that saw no key.
  float* o_part = nullptr;
  float* lse_part = nullptr;
};

// The device-side clamp of a sequence's lengths: bad metadata cannot move a read or a write
// out of the cache (cache_seqlens clamped to [0, sk], the visible length to sk).
struct SeqLens {
  int cache;    // keys already in the cache: where the append starts
  int visible;  // keys the queries attend to: cache + s_new, at most sk
};
FLASHATTN_HOST_DEVICE inline SeqLens seq_lens(const detail::KvCacheParams& p, int b) {
  int c = p.cache_seqlens != nullptr ? p.cache_seqlens[b] : p.cache_seqlen;
  c = c < 0 ? 0 : (c > p.sk ? p.sk : c);
  const int64_t v = int64_t(c) + p.s_new;
  return {c, v > p.sk ? p.sk : static_cast<int>(v)};
}

}  // namespace flashattn::decode
