// The sm80 kernel's precomputed shared-memory addressing (sm80/swizzle.h) against the plain
// swizzle, for every (row, chunk) the ldmatrix fragments and the cp.async passes touch: no GPU.
#include <gtest/gtest.h>

#include <cstdint>

#include "sm80/swizzle.h"

namespace swz = flashattn::sm80::swz;

namespace {

// Tile bases the kernel uses: the dynamic smem window is 128-B aligned (kernel.h) and the
// Q/K/V tiles are whole multiples of 128 B apart; include non-zero high bits too.
constexpr uint32_t kBases[] = {0u, 0x400u, 0x8000u, 0x10400u, 0x01000400u};

// ldmatrix: a lane's row is r0 (any row of the tile) plus row_off (a multiple of 8), its chunk
// an even c plus b in {0,1}; lane_at(lane_base(...)) must equal tile + chunk_offset(r0+row_off, c+b).
template <int kHeadDim, bool kSwizzle>
void check_lane_addressing(int rows) {
  constexpr int kRowBytes = kHeadDim * 2, kChunks = kHeadDim / 8;
  int checked = 0;
  for (uint32_t tile : kBases) {
    for (int r0 = 0; r0 < rows; ++r0) {
      for (int b = 0; b < 2; ++b) {
        const uint32_t base = swz::lane_base<kRowBytes, kSwizzle>(tile, r0, b);
        for (int row_off = 0; r0 + row_off < rows + 8 * 16; row_off += 8) {
          for (int c = 0; c < kChunks; c += 2) {
            const uint32_t want = tile + swz::chunk_offset<kRowBytes, kSwizzle>(r0 + row_off, c + b);
            ASSERT_EQ((swz::lane_at<kRowBytes, kSwizzle>(base, row_off, c)), want)
                << "D " << kHeadDim << " tile " << tile << " row " << r0 << "+" << row_off << " chunk " << c
                << "+" << b;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Sm80Swizzle, LaneAddressingMatchesSwizzle) {
  check_lane_addressing<64, true>(256);
  check_lane_addressing<128, true>(256);
  check_lane_addressing<192, true>(128);
  check_lane_addressing<256, true>(128);
  check_lane_addressing<128, false>(128);
}

// The swizzle itself: within a row it permutes the chunks, and within each group of 8 rows every
// chunk column lands in 8 distinct 16-B positions (what makes ldmatrix conflict-free).
TEST(Sm80Swizzle, ChunkOffsetIsAPermutation) {
  constexpr int kRowBytes = 256, kChunks = 16;
  for (int row = 0; row < 64; ++row) {
    uint32_t seen = 0;
    for (int c = 0; c < kChunks; ++c) {
      const uint32_t off = swz::chunk_offset<kRowBytes, true>(row, c);
      ASSERT_EQ(off / kRowBytes, static_cast<uint32_t>(row));
      seen |= 1u << ((off % kRowBytes) / 16);
    }
    EXPECT_EQ(seen, 0xffffu) << "row " << row;
  }
  for (int c = 0; c < kChunks; ++c) {
    uint32_t seen = 0;
    for (int row = 0; row < 8; ++row) seen |= 1u << (((swz::chunk_offset<kRowBytes, true>(row, c) % 128) / 16));
    EXPECT_EQ(seen, 0xffu) << "chunk " << c;
  }
}

// cp.async passes: thread (row0, chunk), pass i covers row row0 + i * kRowsPerPass.
template <int kHeadDim, bool kSwizzle, int kRowsPerPass, int kPasses>
void check_passes() {
  constexpr int kRowBytes = kHeadDim * 2, kChunks = kHeadDim / 8;
  for (int row0 = 0; row0 < kRowsPerPass; ++row0) {
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      const uint32_t first = swz::chunk_offset<kRowBytes, kSwizzle>(row0, chunk);
      for (int i = 0; i < kPasses; ++i) {
        ASSERT_EQ((swz::pass_offset<kRowBytes, kSwizzle, kRowsPerPass>(first, row0, chunk, i)),
                  (swz::chunk_offset<kRowBytes, kSwizzle>(row0 + i * kRowsPerPass, chunk)))
            << "D " << kHeadDim << " rows/pass " << kRowsPerPass << " row0 " << row0 << " chunk " << chunk
            << " pass " << i;
      }
    }
  }
}

TEST(Sm80Swizzle, PassOffsetsMatchSwizzle) {
  // (threads / chunks per row) rows per pass for 4 and 8 warps, tiles of 32..128 rows.
  check_passes<64, true, 16, 8>();    // 128 threads
  check_passes<64, true, 32, 4>();    // 256 threads
  check_passes<128, true, 8, 16>();   // 128 threads
  check_passes<128, true, 16, 8>();   // 256 threads
  check_passes<256, true, 4, 32>();   // 128 threads: rows/pass % 8 != 0, generic path
  check_passes<256, true, 8, 16>();   // 256 threads
  check_passes<128, false, 8, 16>();
}

}  // namespace
