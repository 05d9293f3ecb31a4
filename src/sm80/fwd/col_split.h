// The warp pairs of the sm80 forward's o_col_split configurations (fwd/config.h): two warps own
// the same kWarpRows query rows; warp half 0 computes S on the block's first 32 keys and O's
// first half of head-dim columns, half 1 the others. Per key block the pair
//   1. exchanges its row maxima (float per row and half, then the max of the two), so both
//      warps take the same running max and the same lazy-rescale decision: the P both write are
//      relative to one max per row, and each warp rescales its own O columns by the same alpha;
//   2. writes its half of P (stmatrix, the mma A-fragment order) and, after the pair's barrier,
//      reads all of P (ldmatrix) as PV's A operand;
// and at the end adds the partner's row sums to its own. Shared memory: P (BlockM x 64 keys,
// 128-B rows, 16-B chunks XOR-swizzled by row % 8) and float [2][2][BlockM] of statistics, past
// Q, K and V. The CTA-wide barriers at the top and middle of each iteration order one block's
// reads of P and of the maxima before the next block's writes.
#pragma once

#include <cstdint>

#include "arch/ldmatrix.h"
#include "arch/named_barrier.h"

namespace flashattn::sm80 {

// What the other configurations hold in a WarpPair's place.
struct NoWarpPair {
  __device__ __forceinline__ NoWarpPair(unsigned char*, int, int) {}
};

template <class Cfg>
struct WarpPair {
  static_assert(Cfg::kColSplit && Cfg::kBlockN == 64, "o_col_split tiles (fwd/config.h)");
  static constexpr int kMT = Cfg::kMTiles;
  static constexpr int kPRowBytes = Cfg::kBlockN * 2;
  int pair;       // row group: warp / 2
  int half;       // column half: warp % 2
  int lane;
  int row0;       // the pair's first row in the block
  uint32_t p_lane;  // P: byte address of this lane's row in ldmatrix / stmatrix order
  int p_xor;        // its chunk XOR term (the lane's chunk bit ^ row % 8)
  float* stats;     // float [2][2][BlockM]: row max, row sum; by half, then row
  unsigned char* p_tile;  // P's generic address (the sm_8x store below)

  __device__ __forceinline__ WarpPair(unsigned char* smem, int warp, int lane_)
      : pair(warp >> 1), half(warp & 1), lane(lane_), row0((warp >> 1) * Cfg::kWarpRows) {
    const uint32_t sP = arch::smem_u32(smem) + Cfg::kSmemQ + Cfg::kSmemK + Cfg::kSmemV;
    // A-operand order: lanes 0-7 / 8-15 / 16-23 / 24-31 address rows 0-7 / 8-15 / 0-7 / 8-15 of
    // an m16 tile at chunks c / c / c+1 / c+1 (the same for stmatrix's four 8x8 matrices).
    const int row = row0 + (lane & 7) + 8 * ((lane >> 3) & 1);
    p_lane = sP + static_cast<uint32_t>(row * kPRowBytes);
    p_xor = (lane >> 4) ^ (lane & 7);
    stats = reinterpret_cast<float*>(smem + Cfg::kSmemQ + Cfg::kSmemK + Cfg::kSmemV + Cfg::kSmemP);
    p_tile = smem + Cfg::kSmemQ + Cfg::kSmemK + Cfg::kSmemV;
  }

  // The pair's barrier: named barrier 1 + pair of 64 threads (ids are immediates, so the pair
  // picks one of kWarpsM; only those are reserved).
  template <int kPair = 0>
  __device__ __forceinline__ void sync() const {
    if constexpr (kPair + 1 == Cfg::kWarpsM) {
      arch::named_barrier_sync<1 + kPair, 64>();
    } else if (pair == kPair) {
      arch::named_barrier_sync<1 + kPair, 64>();
    } else {
      sync<kPair + 1>();
    }
  }

  // Shared-memory address of P chunk c (0..7, even) of m16 tile mt for this lane.
  __device__ __forceinline__ uint32_t p_at(int mt, int c) const {
    return p_lane + static_cast<uint32_t>(mt * 16 * kPRowBytes + (((c ^ p_xor) & 7) << 4));
  }

  // Row (mt, h) of this lane, in the block.
  __device__ __forceinline__ int row(int mt, int h) const { return row0 + mt * 16 + (lane >> 2) + 8 * h; }

  // mx: this warp's row maxima (already reduced over the quad); returns with the pair's.
  __device__ __forceinline__ void max_rows(float (&mx)[kMT][2]) const {
    float* mine = stats + half * Cfg::kBlockM;
    const float* other = stats + (half ^ 1) * Cfg::kBlockM;
    if ((lane & 3) == 0) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) mine[row(mt, h)] = mx[mt][h];
    }
    sync();
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) mx[mt][h] = fmaxf(mx[mt][h], other[row(mt, h)]);
  }

  // sums: this lane's partial row sums (its quad's sum over this warp's keys is the warp's); adds
  // the partner warp's total to the quad's first lane, so a quad sum gives the row's total.
  __device__ __forceinline__ void add_partner_sums(float (&sums)[kMT][2]) const {
    float* mine = stats + (2 + half) * Cfg::kBlockM;
    const float* other = stats + (2 + (half ^ 1)) * Cfg::kBlockM;
    float quad[kMT][2];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float x = sums[mt][h];
        x += __shfl_xor_sync(0xffffffffu, x, 1);
        quad[mt][h] = x + __shfl_xor_sync(0xffffffffu, x, 2);
        if ((lane & 3) == 0) mine[row(mt, h)] = quad[mt][h];
      }
    sync();
    if ((lane & 3) == 0) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) sums[mt][h] += other[row(mt, h)];
    }
  }

  // Writes this warp's half of P, rP[ks][mt] (A fragments of its k16 steps), then waits for the
  // partner's half.
  template <int kKS>
  __device__ __forceinline__ void store_p(const uint32_t (&rP)[kKS][kMT][4]) const {
    static_assert(kKS * 2 * 2 == Cfg::kBlockN / 8, "a half of P is two k16 steps");
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int c = half * 2 * kKS + 2 * ks;
#if __CUDA_ARCH__ >= 900
        arch::stmatrix_x4(p_at(mt, c), rP[ks][mt]);
#else
        // sm_8x has no stmatrix: matrix i's pair goes to row (i & 1) * 8 + lane / 4 of the m16
        // tile, chunk c + i / 2, bytes 4 * (lane % 4) of it (rows are 8-aligned: the swizzle
        // term is (lane / 4) % 8).
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = row0 + mt * 16 + (i & 1) * 8 + (lane >> 2);
          const int chunk = (c + (i >> 1)) ^ ((lane >> 2) & 7);
          *reinterpret_cast<uint32_t*>(p_tile + r * kPRowBytes + chunk * 16 + 4 * (lane & 3)) = rP[ks][mt][i];
        }
#endif
      }
    sync();
  }

  // P's A fragments of k16 step ks (keys 16ks..16ks+15 of the block) for every m tile.
  __device__ __forceinline__ void load_p(uint32_t (&rp)[kMT][4], int ks) const {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) arch::ldmatrix_x4(rp[mt], p_at(mt, 2 * ks));
  }
};

}  // namespace flashattn::sm80
