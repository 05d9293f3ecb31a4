// The sm80 kernel's fragment and tile layouts, no GPU: the precomputed shared-memory addressing
// (sm80/swizzle.h) against the plain swizzle, for every (row, chunk) the ldmatrix fragments and
// the cp.async passes touch; the loader's thread-to-(row, chunk) mapping (every chunk of a tile
// exactly once, idle threads and partial last passes included); and the S-fragment masking and key-block bounds (sm80/mask.h)
// against common/mask.h's rule for every lane of every warp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/mask.h"
#include "sm80/mask.h"
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

// The cp.async loader mapping (swz::LoaderMap, used by TileLoader): over every thread and pass
// it copies, each (row, chunk) of the (kRows, kHeadDim) tile exactly once, never a row >= kRows
// (nor, so, a byte past the tile), each thread always its own chunk tid % kChunks (the padded
// kernels' column predicate); its swizzled smem offsets (pass_offset from the thread's first
// one, as load_strided forms them) match chunk_offset; under kWholePasses the passes tile the
// rows exactly (the strided walk moves a source pointer one tile per kPasses steps).
template <int kHeadDim, int kThreads, int kRows, bool kWholePasses>
void check_loader_map(bool expect_idle, bool expect_partial) {
  using Map = swz::LoaderMap<kThreads, kHeadDim / 8, kRows, kWholePasses>;
  constexpr int kChunks = kHeadDim / 8, kRowBytes = kHeadDim * 2;
  const std::string what = "D " + std::to_string(kHeadDim) + " threads " + std::to_string(kThreads) + " rows " +
                           std::to_string(kRows) + (kWholePasses ? " whole passes" : "");
  EXPECT_EQ(Map::kIdleThreads, expect_idle) << what;
  EXPECT_EQ(Map::kPartialLastPass, expect_partial) << what;
  EXPECT_LE(Map::kRowsPerPass, kThreads / kChunks) << what;
  if (kWholePasses) {
    EXPECT_EQ(Map::kPasses * Map::kRowsPerPass, kRows) << what;
  }
  std::vector<int> hits(kRows * kChunks, 0);
  int copies = 0;
  for (int tid = 0; tid < kThreads; ++tid) {
    const int row0 = Map::row0(tid), chunk = Map::chunk(tid);
    ASSERT_EQ(chunk, tid % kChunks) << what;
    const uint32_t first = swz::chunk_offset<kRowBytes, true>(row0, chunk);
    for (int i = 0; i < Map::kPasses; ++i) {
      if (!Map::copies(row0, i)) continue;
      const int row = Map::row(row0, i);
      ASSERT_GE(row, 0) << what;
      ASSERT_LT(row, kRows) << what << " tid " << tid << " pass " << i;
      const uint32_t off = swz::pass_offset<kRowBytes, true, Map::kRowsPerPass>(first, row0, chunk, i);
      ASSERT_EQ(off, (swz::chunk_offset<kRowBytes, true>(row, chunk))) << what << " tid " << tid << " pass " << i;
      ASSERT_LT(off, uint32_t(kRows * kRowBytes)) << what;
      ++hits[row * kChunks + chunk];
      ++copies;
    }
  }
  EXPECT_EQ(copies, kRows * kChunks) << what;
  for (int row = 0; row < kRows; ++row)
    for (int c = 0; c < kChunks; ++c) ASSERT_EQ(hits[row * kChunks + c], 1) << what << " row " << row << " chunk " << c;
}

TEST(Sm80Loader, MappingCoversEachTileChunkOnce) {
  // D = 192 (24 chunks a row). 8 warps: 10 rows a pass (16 threads idle), the last of 13 (7)
  // passes 8 (4) rows; whole passes (StridedLoads) take 8 rows (64 threads idle).
  check_loader_map<192, 256, 128, false>(true, true);
  check_loader_map<192, 256, 64, false>(true, true);
  check_loader_map<192, 256, 128, true>(true, false);
  check_loader_map<192, 256, 64, true>(true, false);
  // 4 warps: 5 rows a pass (8 threads idle); whole passes 4 (32 idle).
  check_loader_map<192, 128, 64, false>(true, true);
  check_loader_map<192, 128, 128, false>(true, true);
  check_loader_map<192, 128, 64, true>(true, false);
  check_loader_map<192, 128, 128, true>(true, false);
  // 6 warps (today's default 96x64): 8 rows a pass, nobody idle, nothing partial.
  check_loader_map<192, 192, 96, false>(false, false);
  check_loader_map<192, 192, 64, true>(false, false);
  // Head dims 64..256 with 4 and 8 warps: neither case, so copies() is the constant true (and the
  // kernels' code unchanged).
  check_loader_map<64, 128, 128, true>(false, false);
  check_loader_map<64, 256, 64, true>(false, false);
  check_loader_map<128, 128, 64, true>(false, false);
  check_loader_map<128, 256, 128, false>(false, false);
  check_loader_map<256, 128, 64, true>(false, false);
  check_loader_map<256, 256, 32, true>(false, false);
}

// The kernel's use of sm80/mask.h for a (kBM, kBN, kWarps) tile: the key blocks it visits
// [0, n_block_end32), the masked ones first (n_block_needs_mask), and mask_fragment on the S
// fragment of every lane of every warp in each masked block. Rows past sq are never written, so
// only rows < sq are checked; every key past sk must be hidden.
template <flashattn::MaskKind Kind, int kBM, int kBN, int kWarps>
void check_mask(int sq, int sk) {
  using flashattn::sm80::mask_fragment;
  constexpr int kMT = kBM / (16 * kWarps), kNS = kBN / 8;
  const flashattn::Mask<Kind> mask{sq, sk};
  const int num_m = (sq + kBM - 1) / kBM;
  for (int mb = 0; mb < num_m; ++mb) {
    const int m0 = mb * kBM, rows = sq - m0 < kBM ? sq - m0 : kBM;
    const int n_end = flashattn::sm80::n_block_end32(mask, m0, rows, kBN);
    ASSERT_EQ(n_end, mask.n_block_range(mb, kBM, kBN).hi) << sq << "x" << sk << " mb " << mb;
    const int unmasked = mask.num_unmasked_n_blocks(m0, kBN);
    for (int n = 0; n < n_end; ++n) {
      const bool needs = flashattn::sm80::n_block_needs_mask(mask, n, m0, kBN);
      ASSERT_EQ(needs, n >= unmasked) << sq << "x" << sk << " mb " << mb << " n " << n;
      if (!needs) continue;
      for (int warp = 0; warp < kWarps; ++warp) {
        for (int lane = 0; lane < 32; ++lane) {
          float rS[kMT][kNS][4] = {};
          const int row0 = m0 + warp * kMT * 16 + (lane >> 2), col0 = n * kBN + 2 * (lane & 3);
          mask_fragment<16>(mask, rS, row0, col0);
          for (int mt = 0; mt < kMT; ++mt)
            for (int nt = 0; nt < kNS; ++nt)
              for (int e = 0; e < 4; ++e) {
                const int row = row0 + mt * 16 + 8 * (e >> 1), col = col0 + nt * 8 + (e & 1);
                if (row >= sq) continue;
                ASSERT_EQ(std::isinf(rS[mt][nt][e]), !mask.visible(row, col))
                    << sq << "x" << sk << " row " << row << " col " << col;
              }
        }
      }
    }
  }
}

TEST(Sm80Mask, FragmentsAndBlockBoundsMatchTheRule) {
  using flashattn::MaskKind;
  const std::vector<std::pair<int, int>> shapes = {{1, 1},     {1, 300},   {17, 17},  {113, 1000}, {1000, 113},
                                                   {128, 128}, {257, 255}, {300, 64}, {64, 1},     {200, 333}};
  for (auto [sq, sk] : shapes) {
    check_mask<MaskKind::kNone, 128, 64, 4>(sq, sk);
    check_mask<MaskKind::kCausal, 128, 64, 4>(sq, sk);
    check_mask<MaskKind::kCausal, 64, 64, 4>(sq, sk);
    check_mask<MaskKind::kCausal, 128, 128, 4>(sq, sk);
    check_mask<MaskKind::kCausal, 128, 64, 8>(sq, sk);
    check_mask<MaskKind::kNone, 128, 32, 8>(sq, sk);
  }
}

// The feature kernels' window walk (kLocal) for a (kBM, kBN, kWarps) tile: the key blocks a
// query block visits (sm80::walk_local_blocks over Mask::n_block_range, last to first, each
// once), that every block it skips hides all its keys from the block's rows, that every block
// it walks unmasked is seen whole by them, and mask_fragment on every lane of every warp in the
// masked ones. Rows past sq are never written, so only rows < sq are checked.
template <int kBM, int kBN, int kWarps>
void check_local_mask(int sq, int sk, int left, int right, bool causal) {
  using flashattn::BlockRange;
  using flashattn::sm80::mask_fragment;
  constexpr int kMT = kBM / (16 * kWarps), kNS = kBN / 8;
  const auto mask = flashattn::make_local_mask(sq, sk, left, right, causal);
  const std::string what = std::to_string(sq) + "x" + std::to_string(sk) + " window " + std::to_string(left) +
                           "," + std::to_string(right) + (causal ? " causal" : "");
  const int num_m = (sq + kBM - 1) / kBM, num_n = (sk + kBN - 1) / kBN;
  for (int mb = 0; mb < num_m; ++mb) {
    const int m0 = mb * kBM, m_end = sq < m0 + kBM ? sq : m0 + kBM;
    const BlockRange r = mask.n_block_range(mb, kBM, kBN);
    const BlockRange u = mask.unmasked_n_block_range(mb, kBM, kBN);
    std::vector<std::pair<int, bool>> walked;  // (block, masked)
    if (!r.empty()) {
      flashattn::sm80::walk_local_blocks({r.lo, u}, r.hi,
                                         [&](int n, auto masked) { walked.push_back({n, decltype(masked)::value}); });
    }
    const int want = r.empty() ? 0 : r.hi - r.lo;
    ASSERT_EQ(static_cast<int>(walked.size()), want) << what << " mb " << mb;
    for (int i = 0; i < want; ++i) ASSERT_EQ(walked[i].first, r.hi - 1 - i) << what << " mb " << mb;
    // Blocks not walked: no row of the block sees any of their keys.
    for (int n = 0; n < num_n; ++n) {
      if (!r.empty() && n >= r.lo && n < r.hi) continue;
      for (int row = m0; row < m_end; ++row) {
        ASSERT_TRUE(mask.key_end(row) <= n * kBN || mask.key_begin(row) >= (n + 1) * kBN || mask.key_end(row) <= mask.key_begin(row))
            << what << " row " << row << " sees a key of skipped block " << n;
      }
    }
    for (auto [n, masked] : walked) {
      if (!masked) {
        for (int row = m0; row < m_end; ++row) {
          ASSERT_TRUE(mask.key_begin(row) <= n * kBN && mask.key_end(row) >= (n + 1) * kBN)
              << what << " row " << row << " does not see all of unmasked block " << n;
        }
        continue;
      }
      for (int warp = 0; warp < kWarps; ++warp) {
        for (int lane = 0; lane < 32; ++lane) {
          float rS[kMT][kNS][4] = {};
          const int row0 = m0 + warp * kMT * 16 + (lane >> 2), col0 = n * kBN + 2 * (lane & 3);
          mask_fragment<16>(mask, rS, row0, col0);
          for (int mt = 0; mt < kMT; ++mt)
            for (int nt = 0; nt < kNS; ++nt)
              for (int e = 0; e < 4; ++e) {
                const int row = row0 + mt * 16 + 8 * (e >> 1), col = col0 + nt * 8 + (e & 1);
                if (row >= sq) continue;
                ASSERT_EQ(std::isinf(rS[mt][nt][e]), !mask.visible(row, col))
                    << what << " row " << row << " col " << col;
              }
        }
      }
    }
  }
}

TEST(Sm80Mask, LocalWalkAndFragmentsMatchTheRule) {
  const std::vector<std::pair<int, int>> shapes = {{1, 1},     {17, 300},  {300, 17},  {113, 1000},
                                                   {1000, 113}, {257, 255}, {700, 700}, {64, 1}};
  const std::vector<std::pair<int, int>> windows = {{0, 0},   {1, 0},    {127, 0}, {256, 256},
                                                    {1000, 3}, {-1, 0},  {5, -1},  {-1, -1}, {0, 63}};
  for (auto [sq, sk] : shapes) {
    for (auto [l, r] : windows) {
      for (bool causal : {false, true}) {
        check_local_mask<128, 64, 4>(sq, sk, l, r, causal);
        check_local_mask<64, 64, 4>(sq, sk, l, r, causal);
        check_local_mask<96, 64, 6>(sq, sk, l, r, causal);
      }
    }
  }
}

}  // namespace
