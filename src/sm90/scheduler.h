// Tile scheduler: maps a linear tile index to (m block, head, batch). With kPersistent the grid
// is one CTA per SM and each CTA strides over tiles, so the producer can load tile i+1 while
// the consumers run tile i's epilogue; without it, one CTA per tile.
#pragma once

namespace flashattn::sm90 {

struct TileScheduler {
  int num_m_blocks, hq, b;
  bool causal;

  __device__ __forceinline__ int num_tiles() const { return num_m_blocks * hq * b; }
  __device__ __forceinline__ int first() const { return blockIdx.x; }
  __device__ __forceinline__ int next(int t) const { return t + gridDim.x; }

  // Non-causal: m is the fastest index so concurrent CTAs share one head's K/V in L2 (all tiles
  // cost the same, so round-robin is balanced).
  // Causal: tiles sorted longest first (m slowest, descending). A static stride over a list
  // sorted by cost keeps each "round" of gridDim tiles nearly uniform; with m fastest a round
  // mixes 1..num_m-block tiles and every round costs its longest one (measured: 454 vs 668
  // TFLOPS at S=16k). Concurrent CTAs then sit at the same key positions of different heads,
  // so their K/V streams still overlap in time.
  __device__ __forceinline__ void decode(int t, int& m_block, int& h, int& bb) const {
    int hb;
    if (causal) {
      const int nhb = hq * b;
      const int mi = t / nhb;
      hb = t - mi * nhb;
      m_block = num_m_blocks - 1 - mi;
    } else {
      hb = t / num_m_blocks;
      m_block = num_m_blocks - 1 - (t - hb * num_m_blocks);
    }
    h = hb % hq;
    bb = hb / hq;
  }
};

}  // namespace flashattn::sm90
