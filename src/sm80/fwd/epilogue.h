// Epilogue of the sm80 forward kernel: normalize O, convert to the element type, stage each
// warp's rows through (swizzled) shared memory (the warp's own Q rows, which only it read) and
// write them to global memory in 16-B chunks; rows past sq are never written, nor (padded
// kernels, Cfg::kPadded) the columns at or past out's head dim o_cols. o_col_split (fwd/
// col_split.h): each warp of a pair stages and writes its half of the pair's columns; the barrier
// in the middle of the last iteration orders it after every warp's last read of Q.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "arch/convert.h"
#include "sm80/smem_tile.h"

namespace flashattn::sm80 {

template <class Cfg, class Elem>
struct Epilogue {
  static constexpr int kMT = Cfg::kMTiles;
  static constexpr int kNO = Cfg::kNTilesO;
  static constexpr int kChunks = Cfg::kChunksPerRow;
  static constexpr bool kBf16 = std::is_same_v<Elem, __nv_bfloat16>;
  // 16-B chunks of a row this warp writes: all, or (o_col_split) its half's.
  static constexpr int kOwnChunks = kChunks / Cfg::kColHalves;
  unsigned char* smem;
  int warp_row0;
  int lane;
  // o_col_split: the warp's column half (nothing in the other configurations).
  struct NoHalf {};
  [[no_unique_address]] std::conditional_t<Cfg::kColSplit, int, NoHalf> half{};

  // Chunk nt of this warp's half of the columns (o_col_split).
  __device__ __forceinline__ int half_chunk(int nt) const {
    if constexpr (Cfg::kColSplit) return half * kOwnChunks + nt;
    return nt;
  }


  // Copies this warp's staged rows (kWarpRows, kHeadDim) from smem to gO (block row 0).
  __device__ __forceinline__ void store_rows(Elem* gO, int64_t o_ss, int rows_valid,
                                             [[maybe_unused]] int o_cols) const {
    constexpr int kIters = Cfg::kWarpRows * kOwnChunks / 32;
    static_assert(Cfg::kWarpRows * kOwnChunks % 32 == 0, "store mapping");
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = lane + 32 * i;
      const int r = warp_row0 + idx / kOwnChunks;
      int c = idx % kOwnChunks;
      if constexpr (Cfg::kColSplit) c += half * kOwnChunks;
      const uint4 v = *reinterpret_cast<const uint4*>(smem + SmemTile<Cfg>::chunk_offset(r, c));
      bool store = r < rows_valid;
      if constexpr (Cfg::kPadded) store = store && c * 8 < o_cols;
      if (store) *reinterpret_cast<uint4*>(gO + r * o_ss + c * 8) = v;
    }
  }

  __device__ __forceinline__ void write(const float (&rO)[kMT][kNO][4], const float (&inv)[kMT][2],
                                        const float (&lse)[kMT][2], Elem* gO, int64_t o_ss, float* gLse,
                                        int rows_valid, int o_cols) const {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp_row0 + mt * 16 + (lane >> 2) + 8 * h;
#pragma unroll
        for (int nt = 0; nt < kNO; ++nt) {
          const uint32_t v = arch::pack_f32x2<kBf16>(rO[mt][nt][2 * h] * inv[mt][h], rO[mt][nt][2 * h + 1] * inv[mt][h]);
          // (half_chunk(nt) alone, nt without o_col_split, changed the other kernels' PTX)
          const int c = Cfg::kColSplit ? half_chunk(nt) : nt;
          *reinterpret_cast<uint32_t*>(smem + SmemTile<Cfg>::chunk_offset(r, c) + 4 * (lane & 3)) = v;
        }
        if constexpr (Cfg::kColSplit) {
          if (gLse != nullptr && (lane & 3) == 0 && half == 0 && r < rows_valid) gLse[r] = lse[mt][h];
        } else {
          if (gLse != nullptr && (lane & 3) == 0 && r < rows_valid) gLse[r] = lse[mt][h];
        }
      }
    }
    __syncwarp();
    store_rows(gO, o_ss, rows_valid, o_cols);
  }

  // Every row of the block is fully masked: out 0, lse -inf.
  __device__ __forceinline__ void write_empty(Elem* gO, int64_t o_ss, float* gLse, int rows_valid,
                                              [[maybe_unused]] int o_cols) const {
    constexpr int kIters = Cfg::kWarpRows * kOwnChunks / 32;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = lane + 32 * i;
      const int r = warp_row0 + idx / kOwnChunks;
      int c = idx % kOwnChunks;
      if constexpr (Cfg::kColSplit) c += half * kOwnChunks;
      bool store = r < rows_valid;
      if constexpr (Cfg::kPadded) store = store && c * 8 < o_cols;
      if (store) *reinterpret_cast<uint4*>(gO + r * o_ss + c * 8) = make_uint4(0, 0, 0, 0);
    }
    bool lse_warp = gLse != nullptr;
    if constexpr (Cfg::kColSplit) lse_warp = lse_warp && half == 0;
    if (lse_warp) {
      for (int r = warp_row0 + lane; r < warp_row0 + Cfg::kWarpRows; r += 32) {
        if (r < rows_valid) gLse[r] = -INFINITY;
      }
    }
  }
};

}  // namespace flashattn::sm80
