// Warp-level GEMMs of the sm80 forward kernel, fed by ldmatrix from swizzled shared memory:
//   S = Q K^T  (A = Q rows of this warp, B = K rows; both K-contiguous -> plain ldmatrix)
//   O += P V   (A = P from registers, B = V row-major over keys -> ldmatrix.trans)
// The k dimension is walked in slices of Cfg::kSliceQK / kSlicePV k16 steps ("fragment
// interleaving"); with kRfDoubleBuffer the next slice's ldmatrix is issued before this slice's
// mma ("SMEM->RF double buffering").
#pragma once

#include <cstdint>
#include <type_traits>

#include "arch/ldmatrix.h"
#include "arch/mma_sm80.h"
#include "sm80/swizzle.h"

namespace flashattn::sm80 {

// Per-lane ldmatrix addressing. A lane's rows are (lane%8) plus multiples of 8, so its swizzle
// term (row & 7) is lane%8 for every fragment; only the chunk index varies. For an even chunk
// base c and a lane bit b in {0,1}: swizzled chunk = (c + b) ^ (lane%8) = c ^ (b ^ lane%8).
template <class Cfg>
struct LaneAddr {
  static constexpr int kRowBytes = Cfg::kHeadDim * 2;
  uint32_t row_bytes;  // byte offset of this lane's row
  int y;               // chunk xor term: b ^ (lane%8) when swizzled, b otherwise

  __device__ __forceinline__ LaneAddr(uint32_t /*tile*/, int row, int b, int lane)
      : row_bytes(static_cast<uint32_t>(row * kRowBytes)), y(Cfg::kSwizzle ? (b ^ (lane & 7)) : b) {}

  // Byte offset of (row + row_off, even chunk c + b), row_off a multiple of 8, c a constant.
  // y < 8, so only c's low 3 bits meet the xor: 4 lane-dependent terms serve every c.
  __device__ __forceinline__ uint32_t at(int row_off, int c) const {
    return row_bytes + static_cast<uint32_t>(row_off * kRowBytes + ((c & ~7) << 4)) +
           static_cast<uint32_t>(((c & 7) ^ y) << 4);
  }
  // Shared-window address of the same in the tile at `tile`.
  __device__ __forceinline__ uint32_t addr(uint32_t tile, int row_off, int c) const { return tile + at(row_off, c); }
};

// PrecomputedSwizzle: the tile base, row and xor term folded into one register per lane; a
// fragment is base ^ ((c & 7) << 4) plus an immediate (swizzle.h says why that is exact).
template <class Cfg>
struct LaneAddrXor {
  static constexpr int kRowBytes = Cfg::kHeadDim * 2;
  uint32_t base;

  __device__ __forceinline__ LaneAddrXor(uint32_t tile, int row, int b, int /*lane*/)
      : base(swz::lane_base<kRowBytes, Cfg::kSwizzle>(tile, row, b)) {}
  // `tile` must be the one given to the constructor (it is already in `base`).
  __device__ __forceinline__ uint32_t addr(uint32_t /*tile*/, int row_off, int c) const {
    return swz::lane_at<kRowBytes, Cfg::kSwizzle>(base, row_off, c);
  }
};

template <class Cfg>
struct WarpGemm {
  static constexpr int kMT = Cfg::kMTiles;
  static constexpr int kNS = Cfg::kNTilesS;
  static constexpr int kNO = Cfg::kNTilesO;

  using Addr = std::conditional_t<Cfg::kPrecomputedSwizzle, LaneAddrXor<Cfg>, LaneAddr<Cfg>>;
  Addr q_addr;  // A operand: row = warp_row0 + lane%8 + 8*((lane>>3)&1), b = lane>>4
  Addr k_addr;  // B operand: row = lane%8 + 8*(lane>>4), b = (lane>>3)&1
  Addr v_addr;  // B operand (trans): row = lane%8 + 8*((lane>>3)&1), b = lane>>4

  // sQ, sK, sV: the tiles every later call names (PrecomputedSwizzle bakes them in).
  __device__ __forceinline__ WarpGemm(uint32_t sQ, uint32_t sK, uint32_t sV, int warp_row0, int lane)
      : q_addr(sQ, warp_row0 + (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4, lane),
        k_addr(sK, (lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1, lane),
        v_addr(sV, (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4, lane) {}
  // Cfg::kColSplit (fwd/col_split.h): column half `half` of a warp pair reads K's rows
  // half * kNS * 8.. (its keys of S) and V's columns half * kNO * 8.. (its columns of O). Both
  // offsets are whole swizzle periods (8 rows, 8 chunks), so they move the lane's base only.
  __device__ __forceinline__ WarpGemm(uint32_t sQ, uint32_t sK, uint32_t sV, int warp_row0, int lane, int half)
      : WarpGemm(sQ, sK, sV, warp_row0, lane) {
    static_assert(Cfg::kColSplit && !Cfg::kPrecomputedSwizzle && kNO % 8 == 0, "column halves of LaneAddr tiles");
    k_addr.row_bytes += static_cast<uint32_t>(half * kNS * 8 * Addr::kRowBytes);
    v_addr.row_bytes += static_cast<uint32_t>(half * kNO * 8 * 2);
  }

  // Q fragments of k16 step ks for all m tiles.
  __device__ __forceinline__ void load_q(uint32_t (&rq)[kMT][4], uint32_t sQ, int ks) const {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) arch::ldmatrix_x4(rq[mt], q_addr.addr(sQ, mt * 16, ks * 2));
  }
  // K fragments of k16 step ks for all n tiles: rk[np] holds n tiles 2np (regs 0,1), 2np+1 (2,3).
  __device__ __forceinline__ void load_k(uint32_t (&rk)[kNS / 2][4], uint32_t sK, int ks) const {
#pragma unroll
    for (int np = 0; np < kNS / 2; ++np) arch::ldmatrix_x4(rk[np], k_addr.addr(sK, np * 16, ks * 2));
  }
  // V fragments of k16 step ks (keys 16ks..16ks+15) for all head-dim n tiles.
  __device__ __forceinline__ void load_v(uint32_t (&rv)[kNO / 2][4], uint32_t sV, int ks) const {
#pragma unroll
    for (int np = 0; np < kNO / 2; ++np) arch::ldmatrix_x4_trans(rv[np], v_addr.addr(sV, ks * 16, np * 2));
  }

  template <bool kBf16, int kNT>
  __device__ __forceinline__ static void mma_step(float (&acc)[kMT][kNT][4], const uint32_t (&a)[kMT][4],
                                                  const uint32_t (&b)[kNT / 2][4]) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const uint32_t bb[2] = {b[nt / 2][(nt & 1) * 2], b[nt / 2][(nt & 1) * 2 + 1]};
        arch::mma_m16n8k16_f32<kBf16>(acc[mt][nt], a[mt], bb);
      }
    }
  }

  // The SMEM->RF slice pipeline shared by QK^T and PV: load_slice(stage, slice) fills a register
  // stage, mma(stage, slice) consumes it. With two stages (RF double buffering) slice s+1 loads
  // while slice s multiplies; with one, each slice loads then multiplies.
  template <int kSlices, int kStages, class Load, class Mma>
  __device__ __forceinline__ static void pipelined_slices(Load&& load_slice, Mma&& mma) {
    if constexpr (kStages == 2) load_slice(0, 0);
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      const int stage = kStages == 2 ? (s & 1) : 0;
      if constexpr (kStages == 2) {
        if (s + 1 < kSlices) load_slice(stage ^ 1, s + 1);
      } else {
        load_slice(0, s);
      }
      mma(stage, s);
    }
  }

  // rS = Q K^T (rS is overwritten). rQres: resident Q fragments when Cfg::kQInRegs.
  template <bool kBf16>
  __device__ __forceinline__ void qk(float (&rS)[kMT][kNS][4], uint32_t sQ, uint32_t sK,
                                     const uint32_t (&rQres)[Cfg::kQInRegs ? Cfg::kKStepsQK : 1][kMT][4]) const {
    constexpr int kSlice = Cfg::kSliceQK;
    constexpr int kSlices = Cfg::kKStepsQK / kSlice;
    constexpr int kStages = Cfg::kRfStages;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) rS[mt][nt][e] = 0.f;

    uint32_t rQ[kStages][kSlice][kMT][4];
    uint32_t rK[kStages][kSlice][kNS / 2][4];
    auto load_slice = [&](int stage, int slice) {
#pragma unroll
      for (int j = 0; j < kSlice; ++j) {
        if constexpr (!Cfg::kQInRegs) load_q(rQ[stage][j], sQ, slice * kSlice + j);
        load_k(rK[stage][j], sK, slice * kSlice + j);
      }
    };
    pipelined_slices<kSlices, kStages>(load_slice, [&](int stage, int s) {
#pragma unroll
      for (int j = 0; j < kSlice; ++j) {
        if constexpr (Cfg::kQInRegs) {
          mma_step<kBf16, kNS>(rS, rQres[s * kSlice + j], rK[stage][j]);
        } else {
          mma_step<kBf16, kNS>(rS, rQ[stage][j], rK[stage][j]);
        }
      }
    });
  }

  // rO += P V with P given as A fragments rP[mt][ks] (k16 steps over the BlockN keys).
  template <bool kBf16>
  __device__ __forceinline__ void pv(float (&rO)[kMT][kNO][4], const uint32_t (&rP)[Cfg::kKStepsPV][kMT][4],
                                     uint32_t sV) const {
    constexpr int kSlice = Cfg::kSlicePV;
    constexpr int kSlices = Cfg::kKStepsPV / kSlice;
    constexpr int kStages = Cfg::kRfStages;
    uint32_t rV[kStages][kSlice][kNO / 2][4];
    auto load_slice = [&](int stage, int slice) {
#pragma unroll
      for (int j = 0; j < kSlice; ++j) load_v(rV[stage][j], sV, slice * kSlice + j);
    };
    pipelined_slices<kSlices, kStages>(load_slice, [&](int stage, int s) {
#pragma unroll
      for (int j = 0; j < kSlice; ++j) mma_step<kBf16, kNO>(rO, rP[s * kSlice + j], rV[stage][j]);
    });
  }

  // rO += P V with P's A fragments loaded by load_p(rp, ks) in the slices, beside V's
  // (o_col_split: P comes from shared memory, fwd/col_split.h).
  template <bool kBf16, class LoadP>
  __device__ __forceinline__ void pv_loaded(float (&rO)[kMT][kNO][4], LoadP&& load_p, uint32_t sV) const {
    constexpr int kSlice = Cfg::kSlicePV;
    constexpr int kSlices = Cfg::kKStepsPV / kSlice;
    constexpr int kStages = Cfg::kRfStages;
    uint32_t rV[kStages][kSlice][kNO / 2][4];
    uint32_t rP[kStages][kSlice][kMT][4];
    auto load_slice = [&](int stage, int slice) {
#pragma unroll
      for (int j = 0; j < kSlice; ++j) {
        load_p(rP[stage][j], slice * kSlice + j);
        load_v(rV[stage][j], sV, slice * kSlice + j);
      }
    };
    pipelined_slices<kSlices, kStages>(load_slice, [&](int stage, int s) {
#pragma unroll
      for (int j = 0; j < kSlice; ++j) mma_step<kBf16, kNO>(rO, rP[stage][j], rV[stage][j]);
    });
  }
};

}  // namespace flashattn::sm80
