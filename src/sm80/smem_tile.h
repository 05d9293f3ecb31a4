// Shared-memory tiles of the sm80 forward kernel: (rows, kHeadDim) b16, row-major, 16-B chunks
// optionally XOR-swizzled by row%8 so that the 8 rows one ldmatrix matrix touches (and the
// 8 rows one warp's O stores touch) fall in 8 different bank groups.
#pragma once

#include <cstdint>

#include "arch/cp_async.h"
#include "sm80/swizzle.h"

namespace flashattn::sm80 {

template <class Cfg>
struct SmemTile {
  static constexpr int kRowBytes = Cfg::kHeadDim * 2;

  // Byte offset of 16-B chunk `chunk` of row `row`.
  __device__ __forceinline__ static uint32_t chunk_offset(int row, int chunk) {
    return swz::chunk_offset<kRowBytes, Cfg::kSwizzle>(row, chunk);
  }
};

// Copies a (kRows, kHeadDim) tile from global memory (row stride `row_stride` elements) into
// shared memory with cp.async; rows >= rows_valid are zero-filled and never read (padded kernels:
// see kColPred and the col_valid form of thread_src for the chunks past the tensor's head dim).
// Thread t owns chunk (t % kChunksPerRow) of rows t / kChunksPerRow + i * kRowsPerPass; the
// mapping (idle threads, a partial last pass, the pass height under StridedLoads) is
// swz::LoaderMap's, host-callable so tests/cpu can check that it covers the tile exactly once.
template <class Cfg, int kRows>
struct TileLoader {
  using Map = swz::LoaderMap<Cfg::kThreads, Cfg::kChunksPerRow, kRows, Cfg::kStridedLoads>;
  static constexpr int kChunks = Cfg::kChunksPerRow;
  static constexpr int kRowsPerPass = Map::kRowsPerPass;
  static constexpr int kPasses = Map::kPasses;

  int row0;   // first row of this thread
  int chunk;  // this thread's 16-B chunk within a row

  __device__ __forceinline__ explicit TileLoader(int tid) : row0(Map::row0(tid)), chunk(Map::chunk(tid)) {}

  // This thread's chunk holds columns below `cols` (a multiple of 8): the col_valid of the loads.
  __device__ __forceinline__ bool chunk_below(int cols) const { return chunk * 8 < cols; }

  // Byte offset of this thread's (row0, chunk) in a tile: pass 0 of load_strided.
  __device__ __forceinline__ uint32_t first_offset() const { return SmemTile<Cfg>::chunk_offset(row0, chunk); }

  // Byte address in gmem of this thread's (row0, chunk) of the tile whose row 0 is `gmem`.
  template <class Elem>
  __device__ __forceinline__ uint64_t thread_src(const Elem* gmem, int64_t row_stride) const {
    return reinterpret_cast<uint64_t>(gmem + static_cast<int64_t>(row0) * row_stride + chunk * 8);
  }
  // The same for padded kernels: a chunk past the head dim (!col_valid) names chunk 0 of its row
  // instead, an address inside every row of the tensor, so load_strided's full tiles need no
  // fallback select per pass (with kColPred their zero-fill is the src-size operand alone;
  // without it the thread copies its row's chunk 0).
  template <class Elem>
  __device__ __forceinline__ uint64_t thread_src(const Elem* gmem, int64_t row_stride, bool col_valid) const {
    return reinterpret_cast<uint64_t>(gmem + static_cast<int64_t>(row0) * row_stride + (col_valid ? chunk * 8 : 0));
  }

  // StridedLoads: loads the tile *below* the one whose pass 0 `src` points at (tiles are walked
  // from the last key block down), leaving `src` at the new tile's pass 0. Passes go from the
  // last to the first so each takes one 64-bit subtract of `pass_bytes` (kRowsPerPass rows of
  // gmem) and no multiply (hence whole passes: kRowsPerPass divides kRows, LoaderMap; idle
  // threads step `src` too but copy nothing); smem offsets are `smem_off` plus constants
  // (swizzle.h). kPredicated: rows >= rows_valid are zero-filled (their source is `fallback`,
  // any mapped address); only the last key block can be partial, so every other tile takes the
  // unpredicated form.
  // kColPred (padded kernels): every pass is also zero-filled when !col_valid (this thread's
  // chunk is at or past the tensor's head dim); `src` must then come from the col_valid form of
  // thread_src, so it stays a mapped address inside full tiles.
  template <bool kPredicated, bool kColPred = false>
  __device__ __forceinline__ void load_strided(uint32_t smem_base, uint32_t smem_off, uint64_t& src,
                                               uint64_t pass_bytes, int rows_valid, const void* fallback,
                                               bool col_valid = true) const {
    static_assert(!Map::kPartialLastPass, "the strided walk steps by whole passes");
    const int rows_left = rows_valid - row0;  // pass i is valid iff i * kRowsPerPass < rows_left
#pragma unroll
    for (int i = kPasses - 1; i >= 0; --i) {
      src -= pass_bytes;
      if (!Map::copies(row0, i)) continue;  // an idle thread (never, when none idle)
      const uint32_t dst =
          smem_base + swz::pass_offset<SmemTile<Cfg>::kRowBytes, Cfg::kSwizzle, kRowsPerPass>(smem_off, row0, chunk, i);
      if constexpr (kPredicated) {
        bool valid = i * kRowsPerPass < rows_left;
        if constexpr (kColPred) valid = valid && col_valid;
        arch::cp_async_cg_16_zfill(dst, valid ? reinterpret_cast<const void*>(src) : fallback, valid);
      } else if constexpr (kColPred) {
        arch::cp_async_cg_16_zfill(dst, reinterpret_cast<const void*>(src), col_valid);
      } else {
        arch::cp_async_cg_16(dst, reinterpret_cast<const void*>(src));
      }
    }
  }

  // load() for a tile whose rows all lie below rows_valid: no row test and no fallback select per
  // pass, and the source steps by one 64-bit add of the pass stride (computed once) instead of a
  // multiply per pass. Same destinations and zero-fill of columns as load().
  template <bool kColPred = false, class Elem>
  __device__ __forceinline__ void load_full(uint32_t smem_base, const Elem* gmem, int64_t row_stride,
                                            bool col_valid = true) const {
    const Elem* src = gmem + static_cast<int64_t>(row0) * row_stride + chunk * 8;
    const int64_t pass_stride = static_cast<int64_t>(kRowsPerPass) * row_stride;
#pragma unroll
    for (int i = 0; i < kPasses; ++i, src += pass_stride) {
      if (!Map::copies(row0, i)) continue;
      const uint32_t dst = smem_base + SmemTile<Cfg>::chunk_offset(Map::row(row0, i), chunk);
      if constexpr (kColPred) arch::cp_async_cg_16_zfill(dst, src, col_valid);
      else arch::cp_async_cg_16(dst, src);
    }
  }

  // gmem: element pointer of row 0, col 0 of the tile. kColPred (padded kernels): every row's
  // chunk is also zero-filled when !col_valid (this thread's chunk is past the head dim).
  template <bool kColPred = false, class Elem>
  __device__ __forceinline__ void load(uint32_t smem_base, const Elem* gmem, int64_t row_stride,
                                       int rows_valid, bool col_valid = true) const {
    const Elem* src = gmem + static_cast<int64_t>(row0) * row_stride + chunk * 8;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      // Idle threads, and rows of a partial last pass past the tile, copy nothing (constant
      // false when neither arises).
      if (!Map::copies(row0, i)) continue;
      const int row = Map::row(row0, i);
      bool valid = row < rows_valid;
      if constexpr (kColPred) valid = valid && col_valid;
      // Invalid rows copy nothing but still name a mapped address (row 0 of the tile).
      const Elem* p = valid ? src + static_cast<int64_t>(i * kRowsPerPass) * row_stride : gmem;
      arch::cp_async_cg_16_zfill(smem_base + SmemTile<Cfg>::chunk_offset(row, chunk), p, valid);
    }
  }
};

}  // namespace flashattn::sm80
