// Stream-K tail (V14): the work plan for tiles that do not fill the last wave.
//
// Non-causal tiles all cost the same, so T tiles on G persistent CTAs take ceil(T/G) tile times
// while the work is T/G: at the standard grid's D=128 points (2048 tiles, 132 SMs) the last
// wave leaves 64 SMs idle for a whole tile, 3% of the kernel. The plan keeps the first
// dp_tiles = T - T%G tiles whole and shares the key blocks of the remaining sk_tiles out
// evenly over `chunks` work items (chunks <= G, so each CTA takes about one). A chunk covers at
// most n_blocks units, so it touches at most two tiles: piece 0 (the end of one tile, or a
// whole tile) and piece 1 (the start of the next). A piece that is not a whole tile leaves
// its unnormalised O, row max and row sum in a workspace slot; the last piece of a tile to
// finish merges all of them in chunk order (deterministic) and writes O and lse.
// With fewer tiles than SMs (dp_tiles = 0) this is split-KV: one tile's keys over many CTAs.
// Host and device share this header; tests/cpu/test_sm90_stream_k.cpp checks the partition.
#pragma once

#include <cmath>

#include "common/fast_div.h"
#include "common/params.h"  // FLASHATTN_HOST_DEVICE

namespace flashattn::sm90 {

using flashattn::FastDiv;

struct StreamKPlan {
  int dp_tiles = 0;  // tiles [0, dp_tiles) run whole
  int sk_tiles = 0;  // tiles [dp_tiles, dp_tiles + sk_tiles) are split along the keys
  int n_blocks = 0;  // key blocks per split tile (all alike: non-causal)
  int chunks = 0;    // work items sharing sk_tiles * n_blocks key blocks; 0: no split
  FastDiv div_chunks, div_blocks;  // x / chunks, x / n_blocks

  // What a piece costs beyond its key blocks (a prologue, a tail and a workspace round trip), in
  // key blocks; chunks get at least twice this. A guess the tail rule below relies on.
  static constexpr int kOverheadUnits = 2;

  // The plan for `tiles` tiles of `n_blocks` key blocks on `ctas` persistent CTAs. Splits only
  // when the split tail (largest chunk + overhead) is clearly shorter than a whole tile.
  FLASHATTN_HOST_DEVICE static StreamKPlan make(long long tiles, int ctas, int n_blocks) {
    StreamKPlan p;
    p.dp_tiles = static_cast<int>(tiles);
    p.n_blocks = n_blocks;
    if (ctas <= 0 || n_blocks < 2 || tiles <= 0) return p;
    const long long rem = tiles % ctas;
    if (rem == 0) return p;
    const long long units = rem * n_blocks;
    long long chunks = units / (2 * kOverheadUnits);  // pieces of >= 2x the overhead
    if (chunks > ctas) chunks = ctas;
    if (chunks < rem) chunks = rem;  // keeps every chunk <= n_blocks units (<= 2 pieces)
    const long long largest = (units + chunks - 1) / chunks;
    // Split only when the tail shrinks by more than a sixth: at 100 of 103 blocks per chunk
    // (D=256, 128 tiles, Sk 8k) the split lost 5%, at 22 of 25 (D=128, 512 tiles) 1%.
    if (chunks == rem || (largest + kOverheadUnits) * 20 > 17LL * n_blocks) return p;
    if (units * (chunks + 1) > 0x7fffffffLL) return p;  // the device does this math in 32 bits
    p.dp_tiles = static_cast<int>(tiles - rem);
    p.sk_tiles = static_cast<int>(rem);
    p.chunks = static_cast<int>(chunks);
    p.div_chunks = FastDiv(p.chunks);
    p.div_blocks = FastDiv(n_blocks);
    return p;
  }

  // 32-bit: make() keeps units * (chunks + 1) below 2^31 (the scheduler thread has 24 registers).
  FLASHATTN_HOST_DEVICE int units() const { return sk_tiles * n_blocks; }
  FLASHATTN_HOST_DEVICE int num_items() const { return dp_tiles + chunks; }
  // First unit of chunk i (i == chunks gives the end).
  FLASHATTN_HOST_DEVICE int chunk_begin(int i) const { return div_chunks(units() * i); }
  // The chunk holding unit u: the largest i with chunk_begin(i) <= u.
  FLASHATTN_HOST_DEVICE int chunk_of(int u) const { return ((u + 1) * chunks - 1) / units(); }

  struct Piece {
    int tile;        // absolute tile index
    int n_lo, n_hi;  // key blocks [n_lo, n_hi)
    int sk_tile;     // tile - dp_tiles (split tiles), -1 for a whole tile
    int slot;        // workspace slot (2 * chunk + piece), -1 for a whole tile
    int first_chunk, last_chunk;  // chunks holding this tile's pieces (merge order)
  };

  // Key-block range of piece p (0 or 1) of work item `item`; false if the item has no such
  // piece. Whole tiles (item < dp_tiles) have one piece; their range assumes no mask (the kernel
  // takes a whole tile's range from its mask instead). All the loader needs.
  FLASHATTN_HOST_DEVICE bool range(int item, int p, int& tile, int& n_lo, int& n_hi) const {
    if (item < dp_tiles) {
      tile = item;
      n_lo = 0;
      n_hi = n_blocks;
      return p == 0;
    }
    const int i = item - dp_tiles;
    const int u0 = chunk_begin(i), u1 = chunk_begin(i + 1);
    const int j = div_blocks(p == 0 ? u0 : u1 - 1), t0 = j * n_blocks;
    if (p == 1 && u0 >= t0) return false;  // the chunk lies in one tile: no second piece
    tile = dp_tiles + j;
    n_lo = p == 0 ? u0 - t0 : 0;
    n_hi = u1 - t0 < n_blocks ? u1 - t0 : n_blocks;
    return true;
  }

  // Piece p of `item` with what the merge needs. A chunk that happens to cover exactly one tile
  // is a whole tile too (slot -1).
  FLASHATTN_HOST_DEVICE bool piece(int item, int p, Piece& out) const {
    out = Piece{0, 0, 0, -1, -1, -1, -1};
    if (!range(item, p, out.tile, out.n_lo, out.n_hi)) return false;
    if (item < dp_tiles) return true;
    const int j = out.tile - dp_tiles;
    out.first_chunk = chunk_of(j * n_blocks);
    out.last_chunk = chunk_of(j * n_blocks + n_blocks - 1);
    if (out.first_chunk != out.last_chunk) {
      out.sk_tile = j;
      out.slot = 2 * (item - dp_tiles) + p;
    }
    return true;
  }

  // Workspace slot of split tile sk_tile's piece held by chunk i (first <= i <= last).
  FLASHATTN_HOST_DEVICE int slot_of(int i, int sk_tile) const {
    return 2 * i + (div_blocks(chunk_begin(i)) == sk_tile ? 0 : 1);
  }
};

// One step of the stream-K merge (stream_k_merge.h) for one row: the running max m (exp2
// domain, scale folded in; -inf while no key was seen) meets a part's max pm. Sets m to the new
// max and returns the factors for the running sum / O (a) and for the part's (b):
// new = running * a + part * b. exp2 is the caller's (the kernel passes ex2.approx). The CPU
// test folds parts of a row this way and compares with the whole row's softmax.
template <class Exp2>
FLASHATTN_HOST_DEVICE inline void merge_factors(float& m, float pm, float& a, float& b, Exp2 exp2) {
  const float mx = fmaxf(m, pm);
  const float off = mx == -INFINITY ? 0.f : mx;  // rows with no key yet: exp2(-inf) = 0, no NaN
  a = exp2(m - off);
  b = exp2(pm - off);
  m = mx;
}

}  // namespace flashattn::sm90
