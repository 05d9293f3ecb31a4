// Address math of the sm80 shared-memory tiles, host-callable so tests/cpu can check the
// precomputed forms against the plain swizzle for every (row, chunk) the kernel touches.
// A tile is (rows, kHeadDim) b16, row-major, kRowBytes = 2 * kHeadDim per row, in 16-B chunks;
// swizzled, chunk c of row r lives at chunk position c ^ (r % 8).
#pragma once

#include <cstdint>

#include "common/params.h"  // FLASHATTN_HOST_DEVICE

namespace flashattn::sm80::swz {

// The reference: byte offset of 16-B chunk `chunk` of row `row`.
template <int kRowBytes, bool kSwizzle>
FLASHATTN_HOST_DEVICE constexpr uint32_t chunk_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * kRowBytes + ((kSwizzle ? (chunk ^ (row & 7)) : chunk) << 4));
}

// Precomputed ldmatrix addressing ("PrecomputedSwizzle"). A lane's ldmatrix row is `row` plus
// a multiple of 8 and its chunk an even constant c plus a lane bit b, so its swizzle term
// (row % 8) never changes and, as c + b = c ^ b, the chunk position is (c & ~7) + ((c & 7) ^ y)
// with y = b ^ (row % 8) < 8. lane_base holds tile_base + row * kRowBytes + (y << 4); with
// tile_base and kRowBytes multiples of 128, bits 4..6 of it are exactly y, so XOR-ing (c & 7) << 4
// into it swizzles without touching any other bit: every fragment address is one LOP3 (none for
// c % 8 == 0) plus an immediate (row_off * kRowBytes + (c & ~7) * 16) that folds into ldmatrix.
template <int kRowBytes, bool kSwizzle>
FLASHATTN_HOST_DEVICE constexpr uint32_t lane_base(uint32_t tile_base, int row, int b) {
  static_assert(kRowBytes % 128 == 0, "the XOR form needs 128-B-aligned rows");
  return tile_base + chunk_offset<kRowBytes, kSwizzle>(row, b);
}

// Address of (row + row_off, chunk c + b) from lane_base(tile_base, row, b); row_off % 8 == 0,
// c even. Unswizzled it is a plain add.
template <int kRowBytes, bool kSwizzle>
FLASHATTN_HOST_DEVICE constexpr uint32_t lane_at(uint32_t base, int row_off, int c) {
  const uint32_t imm = static_cast<uint32_t>(row_off * kRowBytes + ((kSwizzle ? (c & ~7) : c) << 4));
  return (kSwizzle ? (base ^ static_cast<uint32_t>((c & 7) << 4)) : base) + imm;
}

// Strided cp.async addressing ("StridedLoads"): a loader thread owns chunk `chunk` of rows
// row0 + i * kRowsPerPass. When kRowsPerPass % 8 == 0 every pass has the same swizzle term, so
// pass i is the first pass's offset plus a compile-time constant.
template <int kRowBytes, bool kSwizzle, int kRowsPerPass>
FLASHATTN_HOST_DEVICE constexpr uint32_t pass_offset(uint32_t first_pass_offset, int row0, int chunk, int i) {
  if constexpr (kRowsPerPass % 8 == 0 || !kSwizzle) {
    return first_pass_offset + static_cast<uint32_t>(i * kRowsPerPass * kRowBytes);
  } else {
    return chunk_offset<kRowBytes, kSwizzle>(row0 + i * kRowsPerPass, chunk);
  }
}

// The cp.async loader's mapping of a (kRows, kChunks 16-B chunks) tile onto kThreads threads
// (smem_tile.h TileLoader). Thread t owns chunk t % kChunks, the same in every pass (so a padded
// kernel's per-thread column predicate holds for all its loads), of rows
// t / kChunks + i * kRowsPerPass, i < kPasses. kRowsPerPass is kThreads / kChunks (floor);
// threads at or past kRowsPerPass * kChunks copy nothing (kIdleThreads: a 192-wide row has 24
// chunks), and when kRowsPerPass does not divide kRows the last pass copies only the rows below
// kRows (kPartialLastPass). kWholePasses (the StridedLoads walk, which steps a source pointer by
// whole passes and needs kRows / kRowsPerPass of them per tile) takes the largest divisor of
// kRows not above kThreads / kChunks instead, idling more threads. When kThreads is a multiple
// of kChunks and the pass height divides kRows (every head dim but 192) neither case arises and
// copies() is the constant true.
template <int kThreads, int kChunks, int kRows, bool kWholePasses>
struct LoaderMap {
  static_assert(kChunks >= 1 && kThreads >= kChunks, "loader mapping: a row needs one thread per 16-B chunk");
  static_assert(kRows >= 1, "empty tile");
  static constexpr int kMaxRowsPerPass = kThreads / kChunks;
  static constexpr int largest_divisor_at_most(int n, int cap) {
    int d = cap < n ? cap : n;
    while (n % d != 0) --d;
    return d;
  }
  static constexpr int kRowsPerPass = kWholePasses ? largest_divisor_at_most(kRows, kMaxRowsPerPass) : kMaxRowsPerPass;
  static constexpr int kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
  static constexpr int kLastPassRows = kRows - (kPasses - 1) * kRowsPerPass;  // in (0, kRowsPerPass]
  static constexpr bool kIdleThreads = kRowsPerPass * kChunks < kThreads;
  static constexpr bool kPartialLastPass = kLastPassRows < kRowsPerPass;

  FLASHATTN_HOST_DEVICE static constexpr int row0(int tid) { return tid / kChunks; }
  FLASHATTN_HOST_DEVICE static constexpr int chunk(int tid) { return tid % kChunks; }
  // Row of pass i of the thread whose first row is row0.
  FLASHATTN_HOST_DEVICE static constexpr int row(int row0, int i) { return row0 + i * kRowsPerPass; }
  // Whether that thread copies pass i: it is not idle, and the row lies inside the tile.
  FLASHATTN_HOST_DEVICE static constexpr bool copies([[maybe_unused]] int row0, [[maybe_unused]] int i) {
    bool c = true;
    if constexpr (kIdleThreads) c = c && row0 < kRowsPerPass;
    if constexpr (kPartialLastPass) c = c && (i < kPasses - 1 || row0 < kLastPassRows);
    return c;
  }
};

}  // namespace flashattn::sm80::swz
