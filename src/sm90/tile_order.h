// The order in which the sm90 kernels visit their tiles: (m block, head, batch) of tile t.
// Tiles go by groups of `heads_per_group` (batch, head) pairs (a smaller remainder group first,
// so the grid ends on a full group); inside a group the longest m block of every pair comes
// first, then the next longest, and so on. Concurrent CTAs then share
// one group's K/V in L2 (make() sizes groups to fit), and with causal masks the grid ends on
// short tiles. One pair per group (non-causal: all tiles cost the same) is the older order, m
// fastest. Before V14 causal used that too: the trace of D=128 causal 2k showed full-length
// tiles of the last heads starting 246 us into a 271 us kernel, CTAs ending between 228 and
// 271 us. A fully m-slowest order lost L2 locality (588 vs 668 TFLOPS at causal S=16k, D=128,
// one CTA per tile). Host and device; tests/cpu/test_sm90_stream_k.cpp checks it.
#pragma once

#include <algorithm>

#include "common/fast_div.h"

namespace flashattn::sm90 {

struct TileOrder {
  int num_m_blocks = 1, pairs = 1, hq = 1, heads_per_group = 1;
  int first_group = 0;  // pairs in the remainder group that goes first (0: none)
  FastDiv div_hq, div_group_tiles, div_group, div_first_group;

  // grouped (causal): groups whose K and V (2 * sk * d * 2 bytes per pair) fit in l2_budget
  // bytes; otherwise one pair per group.
  static TileOrder make(int num_m_blocks, int hq, int b, int sk, int d, bool grouped,
                        long long l2_budget = 25LL << 20) {
    TileOrder o;
    o.num_m_blocks = num_m_blocks;
    o.hq = hq;
    o.pairs = hq * b;  // the caller has checked num_m_blocks * hq * b < 2^31
    const long long kv_bytes = 4LL * sk * d;
    long long group = grouped && kv_bytes > 0 ? l2_budget / kv_bytes : 1;
    group = std::max(1LL, std::min<long long>(group, o.pairs));
    o.heads_per_group = static_cast<int>(group);
    o.div_hq = FastDiv(hq);
    o.div_group_tiles = FastDiv(o.heads_per_group * num_m_blocks);
    o.div_group = FastDiv(o.heads_per_group);
    o.first_group = o.pairs % o.heads_per_group;
    o.div_first_group = FastDiv(o.first_group == 0 ? 1 : o.first_group);
    return o;
  }

  FLASHATTN_HOST_DEVICE void decode(int t, int& m_block, int& h, int& bb) const {
    const int first_tiles = first_group * num_m_blocks;
    int hb0, m_rank, r;
    if (t < first_tiles) {
      hb0 = 0;
      m_rank = div_first_group(t);
      r = t - m_rank * first_group;
    } else {
      const int u = t - first_tiles;
      const int g = div_group_tiles(u);
      const int v = u - g * heads_per_group * num_m_blocks;
      hb0 = first_group + g * heads_per_group;
      m_rank = div_group(v);
      r = v - m_rank * heads_per_group;
    }
    const int hb = hb0 + r;
    m_block = num_m_blocks - 1 - m_rank;
    bb = div_hq(hb);
    h = hb - bb * hq;
  }
};

}  // namespace flashattn::sm90
