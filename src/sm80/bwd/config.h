// Sm80BwdConfig: the traits struct of the sm80 backward kernel (FlashAttention-2 structure on
// mma.sync + ldmatrix + cp.async). Every optimisation is a named compile-time flag of
// Sm80BwdOptions, as Sm80FwdOptions does for the forward; everything else derives from it.
//
// One CTA owns kBlockN keys of one (batch, kv head); K and V stay in shared memory, and the CTA
// walks the query blocks of every query head of the group, so dK and dV need no reduction.
// Warps own 16 keys each (kDSplit warps share them, each taking a kHeadDim / kDSplit column
// slice of dK and dV). Per query block they compute S^T = K Q^T and dP^T = V dO^T with the keys
// as the mma M side, so P^T and dS^T land in registers already in the A-fragment layout of
// dV += P^T dO and dK += dS^T Q. dQ = dS K needs every key of the block: dS^T goes through
// shared memory and the warps split dQ's rows and columns, adding into an fp32 accumulator in
// global memory (atomics; deterministic mode orders the CTAs' additions per query block).
#pragma once

#include <cstdint>

namespace flashattn::sm80 {

struct Sm80BwdOptions {
  int head_dim = 0, block_m = 0, warps = 0;
  int d_split = 1;             // warps sharing one 16-key slice (each owns 1/d_split of dK/dV's columns)
  bool swizzle = true;         // XOR-swizzled 16-B chunks (conflict-free ldmatrix and dS^T stores)
  bool double_buffer = true;   // Q, dO, lse, dsum of the next query block load under this one's math
  bool vector_atomics = true;  // dQ added two floats per atomic where the arch has it (sm_90+)
  // Query slices per block: S^T, dP^T, P^T and dS^T are computed and consumed one slice of
  // block_m / m_slices queries at a time (fewer live registers; K and V fragments reloaded).
  int m_slices = 1;

  constexpr bool operator==(const Sm80BwdOptions&) const = default;
};

template <Sm80BwdOptions O>
struct Sm80BwdConfig {
  static constexpr Sm80BwdOptions kOptions = O;
  static constexpr bool kTiled = false;
  static constexpr int kHeadDim = O.head_dim;
  static constexpr int kBlockM = O.block_m;
  static constexpr int kWarps = O.warps;
  static constexpr int kDSplit = O.d_split;
  static constexpr bool kSwizzle = O.swizzle;
  static constexpr bool kDoubleBuffer = O.double_buffer;
  static constexpr bool kVectorAtomics = O.vector_atomics;
  // TileLoader (smem_tile.h) reads these names: plain row-predicated loads, no strided walk.
  static constexpr bool kStridedLoads = false;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunksPerRow = kHeadDim / 8;

  static constexpr int kBlockN = 16 * kWarps / kDSplit;  // keys per CTA
  static constexpr int kCols = kHeadDim / kDSplit;       // dK/dV columns of one warp
  static constexpr int kMSlices = O.m_slices;
  static constexpr int kSliceM = kBlockM / kMSlices;    // queries of one slice
  static constexpr int kNTq = kSliceM / 8;               // n8 tiles of S^T / dP^T (queries)
  static constexpr int kKStepsD = kHeadDim / 16;         // k16 steps of S^T, dP^T (head dim)
  static constexpr int kKStepsM = kSliceM / 16;          // k16 steps of dV, dK (queries, per slice)
  static constexpr int kKStepsN = kBlockN / 16;          // k16 steps of dQ (keys)
  static constexpr int kNTcols = kCols / 8;              // n8 tiles of a warp's dK / dV
  // dQ = dS K: warps tile (kBlockM rows) x (kHeadDim cols) as kDqWarpsM x kDqWarpsD.
  static constexpr int kDqWarpsM = kBlockM / 16 < kWarps ? kBlockM / 16 : kWarps;
  static constexpr int kDqWarpsD = kWarps / kDqWarpsM;
  static constexpr int kDqRowTiles = kBlockM / 16 / kDqWarpsM;  // m16 tiles of a warp's dQ
  static constexpr int kDqCols = kHeadDim / kDqWarpsD;
  static constexpr int kNTdq = kDqCols / 8;

  static constexpr int kStages = kDoubleBuffer ? 2 : 1;
  static constexpr int kTileKV = kBlockN * kHeadDim * 2;  // K or V
  static constexpr int kTileQ = kBlockM * kHeadDim * 2;   // Q or dO, one stage
  static constexpr int kTileDs = kBlockN * kBlockM * 2;   // dS^T: keys x queries, b16
  static constexpr int kStatBytes = kBlockM * 4;          // lse (log2) or dsum, one stage
  // Shared-memory map (bytes from a 128-B aligned base; every tile 128-B aligned).
  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + kTileKV;
  static constexpr int kSmemQ = kSmemV + kTileKV;
  static constexpr int kSmemDo = kSmemQ + kStages * kTileQ;
  static constexpr int kSmemDs = kSmemDo + kStages * kTileQ;
  static constexpr int kSmemLse = kSmemDs + kTileDs;
  static constexpr int kSmemDsum = kSmemLse + kStages * kStatBytes;
  static constexpr int kSmemBytes = kSmemDsum + kStages * kStatBytes;

  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head dims 64, 128, 256");
  static_assert(kDSplit == 1 || kDSplit == 2, "one or two warps per 16-key slice");
  static_assert(kWarps % kDSplit == 0 && kCols % 16 == 0, "column slices of whole n16 pairs");
  // dS^T rows are kBlockM b16 wide: the 8-row XOR swizzle needs at least 8 chunks of them.
  static_assert(kBlockM % 64 == 0 || !kSwizzle, "swizzled dS^T rows need kBlockM a multiple of 64");
  static_assert(kBlockM % (16 * kMSlices) == 0 && kKStepsN >= 1, "whole m16 / k16 tiles per slice");
  static_assert(kWarps % kDqWarpsM == 0 && kHeadDim % (16 * kDqWarpsD) == 0, "dQ warp tiling");
  static_assert(kBlockM / 4 * 2 <= kThreads, "one thread per 16-B chunk of lse and dsum");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory budget exceeded (227 KB)");
};

// The tiled layout (bwd/kernel_tiled.h; FlashAttention-2's warp arrangement). Every phase tiles
// the block over the warps its own way: S^T / dP^T as sdp_key_warps x (warps / sdp_key_warps)
// warps of (block_n / sdp_key_warps keys, the rest of the queries), dK / dV as dkv_key_warps x
// (warps / dkv_key_warps) of (keys, head-dim columns), dQ as dq_row_warps x (warps /
// dq_row_warps) of (queries, columns). P^T and dS^T go through shared memory between them. Why:
// the 16-key warps of Sm80BwdConfig read all of Q and dO twice per warp per query block, and the
// kernel is bound by that shared-memory traffic; 32-key warp tiles cut it by about a quarter.
struct Sm80BwdTiledOptions {
  int head_dim = 0, block_m = 0, block_n = 0, warps = 0;
  int sdp_key_warps = 0, dkv_key_warps = 0, dq_row_warps = 0;
  int sdp_slices = 1;          // query slices of a warp's S^T tile (fewer live registers)
  int dq_passes = 1;           // column passes of a warp's dQ tile (fewer live registers)
  bool swizzle = true;         // XOR-swizzled 16-B chunks
  bool double_buffer = true;   // Q, dO, lse, dsum of the next query block load under this one's math
  bool vector_atomics = true;  // dQ added two floats per atomic where the arch has it (sm_90+)

  constexpr bool operator==(const Sm80BwdTiledOptions&) const = default;
};

template <Sm80BwdTiledOptions O>
struct Sm80BwdTiledConfig {
  static constexpr Sm80BwdTiledOptions kOptions = O;
  static constexpr bool kTiled = true;
  static constexpr int kHeadDim = O.head_dim;
  static constexpr int kBlockM = O.block_m;
  static constexpr int kBlockN = O.block_n;
  static constexpr int kWarps = O.warps;
  static constexpr bool kSwizzle = O.swizzle;
  static constexpr bool kDoubleBuffer = O.double_buffer;
  static constexpr bool kVectorAtomics = O.vector_atomics;
  static constexpr bool kStridedLoads = false;  // TileLoader (smem_tile.h)
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunksPerRow = kHeadDim / 8;

  // S^T / dP^T: warp tile kSdpKeys x kSdpQueries, computed kSliceQ queries at a time.
  static constexpr int kSdpKeyWarps = O.sdp_key_warps;
  static constexpr int kSdpKeys = kBlockN / kSdpKeyWarps;
  static constexpr int kSdpQueries = kBlockM / (kWarps / kSdpKeyWarps);
  static constexpr int kSliceQ = kSdpQueries / O.sdp_slices;
  static constexpr int kSdpMT = kSdpKeys / 16;  // m16 tiles (keys)
  static constexpr int kNTq = kSliceQ / 8;      // n8 tiles (queries) of a slice
  // dK / dV: warp tile kDkvKeys x kDkvCols over k = the block's queries.
  static constexpr int kDkvKeyWarps = O.dkv_key_warps;
  static constexpr int kDkvKeys = kBlockN / kDkvKeyWarps;
  static constexpr int kDkvCols = kHeadDim / (kWarps / kDkvKeyWarps);
  static constexpr int kDkvMT = kDkvKeys / 16;
  static constexpr int kNTcols = kDkvCols / 8;
  // dQ = dS K: warp tile kDqRows x kDqCols over k = the block's keys.
  static constexpr int kDqWarpsM = O.dq_row_warps;
  static constexpr int kDqRowTiles = kBlockM / kDqWarpsM / 16;
  static constexpr int kDqCols = kHeadDim / (kWarps / kDqWarpsM);
  static constexpr int kDqPasses = O.dq_passes;
  static constexpr int kNTdq = kDqCols / kDqPasses / 8;  // n8 tiles of one pass

  static constexpr int kStages = kDoubleBuffer ? 2 : 1;
  static constexpr int kTileKV = kBlockN * kHeadDim * 2;
  static constexpr int kTileQ = kBlockM * kHeadDim * 2;
  static constexpr int kTileP = kBlockN * kBlockM * 2;  // P^T or dS^T: keys x queries, b16
  static constexpr int kStatBytes = kBlockM * 4;
  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + kTileKV;
  static constexpr int kSmemQ = kSmemV + kTileKV;
  static constexpr int kSmemDo = kSmemQ + kStages * kTileQ;
  static constexpr int kSmemP = kSmemDo + kStages * kTileQ;
  static constexpr int kSmemDs = kSmemP + kTileP;
  static constexpr int kSmemLse = kSmemDs + kTileP;
  static constexpr int kSmemDsum = kSmemLse + kStages * kStatBytes;
  static constexpr int kSmemBytes = kSmemDsum + kStages * kStatBytes;

  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head dims 64, 128, 256");
  static_assert(kWarps % kSdpKeyWarps == 0 && kWarps % kDkvKeyWarps == 0 && kWarps % kDqWarpsM == 0, "warp grids");
  static_assert(kSdpKeys % 16 == 0 && kSdpQueries % (16 * O.sdp_slices) == 0, "S^T warp tiles of whole m16 / k16 tiles");
  static_assert(kDkvKeys % 16 == 0 && kDkvCols % 16 == 0, "dK / dV warp tiles of whole m16 tiles and n16 pairs");
  static_assert(kDqRowTiles >= 1 && kBlockM % (16 * kDqWarpsM) == 0 && kDqCols % (16 * kDqPasses) == 0, "dQ warp tiles");
  static_assert(kBlockM % 64 == 0 || !kSwizzle, "swizzled P^T / dS^T rows need kBlockM a multiple of 64");
  static_assert(kBlockN % 16 == 0, "whole k16 steps of dQ");
  static_assert(kBlockM / 4 * 2 <= kThreads, "one thread per 16-B chunk of lse and dsum");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory budget exceeded (227 KB)");
};

// The kernels the library ships (one per head dim; every d, d_v up to it runs on it with
// zero-filled columns). d256: two warps per 16 keys (64 x 256 of dK and dV do not fit one warp's
// registers) and one Q/dO stage (two do not fit an A100's shared memory).
inline constexpr Sm80BwdOptions kSm80BwdD64{.head_dim = 64, .block_m = 64, .warps = 8};
inline constexpr Sm80BwdOptions kSm80BwdD128{.head_dim = 128, .block_m = 64, .warps = 8, .m_slices = 2};
inline constexpr Sm80BwdOptions kSm80BwdD256{.head_dim = 256, .block_m = 64, .warps = 8, .d_split = 2,
                                             .double_buffer = false, .m_slices = 2};
// The d256 feature kernel (window / softcap / ALiBi, MaskKind::kLocal): with 32-query slices its
// score pass (window, tanh, ALiBi terms) leaves the kernel short of registers (ptxas spills for
// sm_90a), so it takes 16 queries per slice; shared memory is the plain kernel's.
inline constexpr Sm80BwdOptions kSm80BwdD256Feature{.head_dim = 256, .block_m = 64, .warps = 8, .d_split = 2,
                                                    .double_buffer = false, .m_slices = 4};

// The tiled layout's configurations (FlashAttention-2's tile shapes for the same head dims).
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD64{.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8,
                                                      .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 4,
                                                      .sdp_slices = 2};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD128{.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8,
                                                       .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 2,
                                                       .sdp_slices = 2};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD256{.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8,
                                                       .sdp_key_warps = 2, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                       .dq_passes = 2, .double_buffer = false};
// A/B alternatives (FLASHATTN_SM80_BWD_VARIANT=1 / 2, bwd/launch.h).
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD64Alt1{.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8,
                                                          .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 4};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD64Alt2{.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8,
                                                          .sdp_key_warps = 2, .dkv_key_warps = 4, .dq_row_warps = 4};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD128Alt1{.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8,
                                                           .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD128Alt2{.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8,
                                                           .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 2};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD256Alt1{.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8,
                                                           .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                           .dq_passes = 2, .double_buffer = false};
inline constexpr Sm80BwdTiledOptions kSm80BwdTiledD256Alt2{.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8,
                                                           .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                           .dq_passes = 2};

}  // namespace flashattn::sm80
