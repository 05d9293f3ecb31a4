// The forward's work plan for the persistent scheduler (sm90/scheduler.h): items are whole
// tiles (m block, head, batch) in TileOrder's order, then (stream_k.h) the chunks of the split
// tail. A piece is a tile's key-block range, identified by a code: tile t < dp_tiles as t,
// piece p of chunk i as dp_tiles + 2i + p, the end as code_end().
#pragma once

#include "sm90/fwd/stream_k.h"
#include "sm90/mask.h"
#include "sm90/scheduler.h"
#include "sm90/tile_order.h"

namespace flashattn::sm90 {

template <class Cfg>
struct FwdWorkPlan {
  TileOrder order;
  ItemClaims claims;
  StreamKPlan plan;
  AttnMask<Cfg::kMaskKind> mask;  // varlen: the max lengths
  // Varlen (Cfg::kVarlen): the packed batch's offsets and row counts.
  const int* cu_q = nullptr;
  const int* cu_k = nullptr;
  int total_q = 0, total_k = 0;

  __device__ __forceinline__ int code_end() const { return plan.dp_tiles + 2 * plan.chunks; }
  __device__ __forceinline__ int code(int item, int p) const {
    return item < plan.num_items() ? (item < plan.dp_tiles ? item : plan.dp_tiles + 2 * (item - plan.dp_tiles) + p)
                                   : code_end();
  }
  __device__ __forceinline__ int item_of_code(int code, int& p) const {
    p = code < plan.dp_tiles ? 0 : (code - plan.dp_tiles) & 1;
    return code < plan.dp_tiles ? code : plan.dp_tiles + ((code - plan.dp_tiles) >> 1);
  }
  __device__ __forceinline__ void range_of_code(int code, int& tile, int& n_lo, int& n_hi) const {
    int p;
    const int item = item_of_code(code, p);
    plan.range(item, p, tile, n_lo, n_hi);
  }
  __device__ __forceinline__ bool piece_of_code(int code, StreamKPlan::Piece& w) const {
    int p;
    const int item = item_of_code(code, p);
    return plan.piece(item, p, w);
  }
  __device__ __forceinline__ int first_code() const { return code(claims.first(), 0); }
  // The code after `code`: its item's second piece if it has one, else the first piece of the
  // next item (claimed: one atomic per item in dynamic mode). Without stream-K, codes are tiles.
  __device__ __forceinline__ int next_code(int code) const {
    if constexpr (!Cfg::kStreamK) {
      return claims.next(code);
    } else {
      int p;
      const int item = item_of_code(code, p);
      if (item >= plan.dp_tiles && p == 0) {
        int tile, n_lo, n_hi;
        if (plan.range(item, 1, tile, n_lo, n_hi)) return code + 1;
      }
      return this->code(claims.next(item), 0);
    }
  }
  __device__ __forceinline__ void finish() const { claims.finish(); }

  // The mask of one sequence of a packed batch: its own lengths (causal and the window are
  // bottom-right per sequence), the call's window (an unbounded side is stored as the max
  // length, at least the sequence's: still unbounded).
  __device__ __forceinline__ AttnMask<Cfg::kMaskKind> seq_mask(int sq, int sk) const {
    AttnMask<Cfg::kMaskKind> m = mask;
    m.rule.sq = sq;
    m.rule.sk = sk;
    return m;
  }
  // Sequence w.b of a packed batch: its offsets, and lengths clamped to the max lengths and to
  // the packed rows (bad offsets then shrink a sequence instead of moving reads or writes out of
  // q, k, o or lse). A tile past its sequence's rows gets no key blocks (nothing is stored).
  __device__ __forceinline__ void describe(VarlenWorkSlot& w) const {
    order.decode(w.code, w.m_block, w.h, w.b);
    const int q0 = min(max(cu_q[w.b], 0), total_q), q1 = cu_q[w.b + 1];
    const int k0 = min(max(cu_k[w.b], 0), total_k), k1 = cu_k[w.b + 1];
    w.q_off = q0;
    w.k_off = k0;
    w.sq = max(0, min(min(q1 - q0, mask.rule.sq), total_q - q0));
    w.sk = max(0, min(min(k1 - k0, mask.rule.sk), total_k - k0));
    const int m0 = w.m_block * Cfg::kBlockM;
    const AttnMask<Cfg::kMaskKind> seq = seq_mask(w.sq, w.sk);
    w.n_lo = m0 < w.sq ? seq.first_n_block(m0, Cfg::kBlockN) : 0;
    w.n_hi = m0 < w.sq ? seq.num_n_blocks(m0, Cfg::kBlockM, Cfg::kBlockN) : 0;
    // Tiles past a short sequence's rows (the grid is sized by the longest) cost a claim and a
    // slot round trip each. In the one-pair-per-group order a pair's tiles are consecutive,
    // its m blocks descending, so its empty ones come first: the first CTA to meet one moves
    // the shared claim counter past them (atomicMax: it never moves back, and every tile it
    // skips is empty, whoever would have claimed it).
    if (m0 >= w.sq && claims.counter != nullptr && order.heads_per_group == 1) {
      const int m_blocks = (w.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
      const int pair_base = w.code - (order.num_m_blocks - 1 - w.m_block);
      atomicMax(claims.counter, pair_base + order.num_m_blocks - m_blocks - static_cast<int>(gridDim.x));
    }
  }
  // A piece's tile coordinates and key-block range.
  __device__ __forceinline__ void describe(WorkSlot& w) const {
    int tile = w.code;
    if constexpr (Cfg::kStreamK) range_of_code(w.code, tile, w.n_lo, w.n_hi);
    order.decode(tile, w.m_block, w.h, w.b);
    if constexpr (!Cfg::kStreamK) w.n_hi = mask.num_n_blocks(w.m_block * Cfg::kBlockM, Cfg::kBlockM, Cfg::kBlockN);
    if constexpr (Cfg::kLocal) w.n_lo = mask.first_n_block(w.m_block * Cfg::kBlockM, Cfg::kBlockN);
  }
};

}  // namespace flashattn::sm90
