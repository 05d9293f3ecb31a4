// Epilogue of the sm80 forward kernel: normalize O, convert to the element type, stage each
// warp's rows through (swizzled) shared memory (the warp's own Q rows, which only it read) and
// write them to global memory in 16-B chunks; rows past sq are never written, nor (padded
// kernels, Cfg::kPadded) the columns at or past out's head dim o_cols.
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
  unsigned char* smem;
  int warp_row0;
  int lane;

  // Copies this warp's staged rows (kWarpRows, kHeadDim) from smem to gO (block row 0).
  __device__ __forceinline__ void store_rows(Elem* gO, int64_t o_ss, int rows_valid,
                                             [[maybe_unused]] int o_cols) const {
    constexpr int kIters = Cfg::kWarpRows * kChunks / 32;
    static_assert(Cfg::kWarpRows * kChunks % 32 == 0, "store mapping");
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = lane + 32 * i;
      const int r = warp_row0 + idx / kChunks, c = idx % kChunks;
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
          *reinterpret_cast<uint32_t*>(smem + SmemTile<Cfg>::chunk_offset(r, nt) + 4 * (lane & 3)) = v;
        }
        if (gLse != nullptr && (lane & 3) == 0 && r < rows_valid) gLse[r] = lse[mt][h];
      }
    }
    __syncwarp();
    store_rows(gO, o_ss, rows_valid, o_cols);
  }

  // Every row of the block is fully masked: out 0, lse -inf.
  __device__ __forceinline__ void write_empty(Elem* gO, int64_t o_ss, float* gLse, int rows_valid,
                                              [[maybe_unused]] int o_cols) const {
    constexpr int kIters = Cfg::kWarpRows * kChunks / 32;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = lane + 32 * i;
      const int r = warp_row0 + idx / kChunks, c = idx % kChunks;
      bool store = r < rows_valid;
      if constexpr (Cfg::kPadded) store = store && c * 8 < o_cols;
      if (store) *reinterpret_cast<uint4*>(gO + r * o_ss + c * 8) = make_uint4(0, 0, 0, 0);
    }
    if (gLse != nullptr) {
      for (int r = warp_row0 + lane; r < warp_row0 + Cfg::kWarpRows; r += 32) {
        if (r < rows_valid) gLse[r] = -INFINITY;
      }
    }
  }
};

}  // namespace flashattn::sm80
