// Shared-memory tiles of the sm80 forward kernel: (rows, kHeadDim) b16, row-major, 16-B chunks
// optionally XOR-swizzled by row%8 so that the 8 rows one ldmatrix matrix touches (and the
// 8 rows one warp's O stores touch) fall in 8 different bank groups.
#pragma once

#include <cstdint>

#include "arch/cp_async.h"

namespace flashattn::sm80 {

template <class Cfg>
struct SmemTile {
  static constexpr int kRowBytes = Cfg::kHeadDim * 2;

  // Byte offset of 16-B chunk `chunk` of row `row`.
  __device__ __forceinline__ static uint32_t chunk_offset(int row, int chunk) {
    if constexpr (Cfg::kSwizzle) {
      return static_cast<uint32_t>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
    } else {
      return static_cast<uint32_t>(row * kRowBytes + (chunk << 4));
    }
  }
};

// Copies a (kRows, kHeadDim) tile from global memory (row stride `row_stride` elements) into
// shared memory with cp.async; rows >= rows_valid are zero-filled and never read.
// Thread t owns chunk (t % kChunksPerRow) of rows t / kChunksPerRow + i * kRowsPerPass.
template <class Cfg, int kRows>
struct TileLoader {
  static constexpr int kChunks = Cfg::kChunksPerRow;
  static constexpr int kRowsPerPass = Cfg::kThreads / kChunks;
  static constexpr int kPasses = kRows / kRowsPerPass;
  static_assert(Cfg::kThreads % kChunks == 0 && kRows % kRowsPerPass == 0, "loader mapping");

  int row0;   // first row of this thread
  int chunk;  // this thread's 16-B chunk within a row

  __device__ __forceinline__ explicit TileLoader(int tid) : row0(tid / kChunks), chunk(tid % kChunks) {}

  // gmem: element pointer of row 0, col 0 of the tile.
  template <class Elem>
  __device__ __forceinline__ void load(uint32_t smem_base, const Elem* gmem, int64_t row_stride,
                                       int rows_valid) const {
    const Elem* src = gmem + static_cast<int64_t>(row0) * row_stride + chunk * 8;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = row0 + i * kRowsPerPass;
      const bool valid = row < rows_valid;
      // Invalid rows copy nothing but still name a mapped address (row 0 of the tile).
      const Elem* p = valid ? src + static_cast<int64_t>(i * kRowsPerPass) * row_stride : gmem;
      arch::cp_async_cg_16_zfill(smem_base + SmemTile<Cfg>::chunk_offset(row, chunk), p, valid);
    }
  }
};

}  // namespace flashattn::sm80
