// Sm80BwdConfig: the traits struct of the sm80 backward kernel (bwd/kernel.h; FlashAttention-2's
// backward structure on mma.sync + ldmatrix + cp.async). Every optimisation is a named
// compile-time field of Sm80BwdOptions, as Sm80FwdOptions does for the forward; everything else
// derives from it.
//
// One CTA owns block_n keys of one (batch, kv head); K and V stay in shared memory, and the CTA
// walks the query blocks of every query head of the group, so dK and dV need no reduction. Each
// phase of a query block tiles the block over the warps its own way: S^T = K Q^T and dP^T = V dO^T
// as sdp_key_warps x (warps / sdp_key_warps) warps of (keys, queries), dK += dS^T Q and dV += P^T
// dO as dkv_key_warps x (warps / dkv_key_warps) of (keys, head-dim columns), dQ = dS K as
// dq_row_warps x (warps / dq_row_warps) of (queries, columns); P^T and dS^T go through shared
// memory between them, and dQ is added into an fp32 accumulator in global memory (atomics;
// deterministic mode orders the CTAs' additions per query block). Warp tiles of 32+ keys keep
// the shared-memory reads per MMA low: the kernel is bound by them (docs/VERSIONS.md, sm80
// backward).
#pragma once

#include <cstdint>

// dQ's two-float additions (sm_90+) as PTX red, which returns nothing, instead of atomicAdd on a
// float2, whose atom keeps its unused result registers waiting on the L2 round trip (arch/red.h).
// 2: red from one lane pointer with compile-time offsets and no per-row test (padding rows add
// into the scratch's padded blocks). 0 builds the old atomics for an A/B (docs/VERSIONS.md, sm80
// part, session 28).
#ifndef FLASHATTN_SM80_ABL_BWD_RED_DQ
#define FLASHATTN_SM80_ABL_BWD_RED_DQ 2
#endif

namespace flashattn::sm80 {

struct Sm80BwdOptions {
  int head_dim = 0, block_m = 0, block_n = 0, warps = 0;
  int sdp_key_warps = 0, dkv_key_warps = 0, dq_row_warps = 0;
  int sdp_slices = 1;          // query slices of a warp's S^T tile (fewer live registers)
  int dq_passes = 1;           // column passes of a warp's dQ tile (fewer live registers)
  bool swizzle = true;         // XOR-swizzled 16-B chunks
  bool double_buffer = true;   // Q, dO, lse, dsum of the next query block load under this one's math
  bool vector_atomics = true;  // dQ added two floats per atomic where the arch has it (sm_90+)
  // Feature (kLocal) kernels: a second copy of the score pass without softcap's and ALiBi's
  // per-score work, taken by calls with a window alone (bwd/kernel.h local_scores).
  bool window_only_pass = false;
  // The Q / dO loads of a full query block (all but a sequence's last) without the per-pass row
  // test, fallback select and row multiply (TileLoader::load_full): session 27's profile put
  // ~110 M integer instructions of D=128 S=2k in those loads' address code (docs/VERSIONS.md,
  // sm80 backward, sessions 29-30).
  bool full_block_loads = false;
  // Plain kernels: the score pass in two copies, with and without the causal / key-length mask,
  // behind the block-uniform test of whether the block needs it, so unmasked blocks issue none
  // of its index arithmetic and selects (in one copy they are predicated off but still issued:
  // an FSEL per score in session 27's profile). Pays on causal calls (sessions 29-30).
  bool mask_branch = false;
  // dQ = dS K and its reductions before the dK / dV GEMMs (FlashAttention-2 puts its dQ before
  // dK): the reductions' source registers then drain under the dK / dV MMAs instead of holding up
  // the next block's first instructions (session 29's profile, docs/VERSIONS.md). Needs the Q /
  // dO double buffer (one stage reloads under the dQ GEMM, which would then no longer come last).
  bool dq_first = false;
  // dV += P^T dO before dQ, dK += dS^T Q after dQ's reductions (FlashAttention-2's order): the
  // reductions drain under one GEMM's MMAs while only half of dq_first's LDSMs queue behind them.
  // Needs the double buffer, as dq_first does; the two are exclusive.
  bool dq_mid = false;
  // Deterministic mode: thread 0 passes the query block's turn on right after the dQ additions
  // (fence, barrier, store, behind the uniform deterministic branch). Off, it does so after the
  // next block's first barrier, where the compiler predicates the release (fence included) off
  // for non-deterministic calls and the predicated-off fence still stalled every warp (session
  // 29's profile).
  bool release_after_dq = false;
  // dQ's accumulator in the order the warps add into it (dq_frag_offset below) instead of row-major
  // within each query block: every red.v2 of a warp then covers 256 contiguous bytes (2 cache
  // lines) instead of 8 rows x 32 B (8 lines), so (the hypothesis) the reductions drain through
  // L1 faster and hold their source registers less long. The postprocess reads it back through
  // the same map (bwd/prepost.h *_frag).
  bool dq_frag_order = false;
  // With dq_frag_order: each lane adds the pair of n8 tiles it holds for a row half as one
  // red.v4 (sm_90+), half the red instructions, each warp's covering 512 contiguous bytes.
  bool dq_red_v4 = false;
  // Plain kernels: a query slice's lse / dsum pairs read from shared memory once into registers
  // for all its m16 key tiles, not once per tile (FlashAttention-2 keeps them in registers).
  bool stat_regs = false;
  // Double-buffered kernels: the next query block's loads issued after the first S^T / dP^T
  // slice instead of at the loop top, where their address arithmetic and cp.asyncs come right
  // after the barrier (the loop top's stalls in session 29's profile, docs/VERSIONS.md).
  bool late_q_load = false;
  // dK and dV written through shared memory (the K / V tiles' space, free after the loop) as
  // whole 16-B chunks per thread, FlashAttention-2's epilogue, instead of 4-B stores straight from
  // the MMA fragments (8 rows x 16 B per warp instruction, half of each 32-B sector). The bytes
  // are the same at every S (B * S is fixed on the standard grid), the loop 8x shorter at 2k
  // than at 16k: the short-S cost it targets.
  bool smem_epilogue = false;

  constexpr bool operator==(const Sm80BwdOptions&) const = default;
};

template <Sm80BwdOptions O>
struct Sm80BwdConfig {
  static constexpr Sm80BwdOptions kOptions = O;
  static constexpr int kHeadDim = O.head_dim;
  static constexpr int kBlockM = O.block_m;
  static constexpr int kBlockN = O.block_n;
  static constexpr int kWarps = O.warps;
  static constexpr bool kSwizzle = O.swizzle;
  static constexpr bool kDoubleBuffer = O.double_buffer;
  static constexpr bool kVectorAtomics = O.vector_atomics;
  // TileLoader (smem_tile.h) reads these names: plain row-predicated loads, no strided walk.
  static constexpr bool kStridedLoads = false;
  static constexpr bool kVarlen = false;  // Sm80BwdVarlen below
  static constexpr bool kWindowOnlyPass = O.window_only_pass;
  static constexpr bool kFullBlockLoads = O.full_block_loads;
  static constexpr bool kMaskBranch = O.mask_branch;
  static constexpr bool kDqFirst = O.dq_first;
  static constexpr bool kDqMid = O.dq_mid;
  static constexpr bool kReleaseAfterDq = O.release_after_dq;
  static constexpr bool kDqFragOrder = O.dq_frag_order;
  static constexpr bool kDqRedV4 = O.dq_red_v4;
  static constexpr int kDqVec = kDqRedV4 ? 2 : 1;  // n8 tiles per red instruction
  // kDqFragOrder: floats between the four column pairs of a row's 8 columns (dq_frag_offset).
  static constexpr int kDqPairStride = kDqRedV4 ? 4 : 2;
  static constexpr bool kStatRegs = O.stat_regs;
  static constexpr bool kLateQLoad = O.late_q_load;
  static constexpr bool kSmemEpilogue = O.smem_epilogue;
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
  static constexpr int kDqWarpRows = kDqRowTiles * 16;

  // kDqFragOrder: where row r, columns c..c+7 (c a multiple of 8) of a query block's kBlockM x
  // kHeadDim dQ accumulator sit, as a float offset from the block's start; columns c + 2j and
  // c + 2j + 1 are at + j * kDqPairStride and one after. The block holds the warps' dQ tiles in
  // warp order (warp = column tile * kDqWarpsM + row tile, as the kernel assigns them), each tile
  // its red instructions in issue order (pass, m16 row tile, row half, n8 tile or pair of them
  // under kDqRedV4), each instruction 32 lanes x 2 (4) floats: lane 4 * (r % 8) + j holds the
  // pair j of the row's (two) n8 tile(s). Host and device (constexpr).
  static constexpr int dq_frag_offset(int r, int c) {
    const int tile = (c / kDqCols) * kDqWarpsM + r / kDqWarpRows;
    const int rr = r % kDqWarpRows, cc = c % kDqCols, pass_cols = kDqCols / kDqPasses;
    const int nt = (cc % pass_cols) / 8;
    const int instr = (((cc / pass_cols) * kDqRowTiles + rr / 16) * 2 + (rr / 8) % 2) * (kNTdq / kDqVec) + nt / kDqVec;
    return tile * kDqWarpRows * kDqCols + instr * 64 * kDqVec + (rr % 8) * 8 * kDqVec + (nt % kDqVec) * 2;
  }

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
  static_assert(!kDqFirst || kDoubleBuffer, "dq_first reorders the double-buffered loop only");
  static_assert(!kDqMid || (kDoubleBuffer && !kDqFirst), "dq_mid: the double-buffered loop, without dq_first");
  static_assert(!kLateQLoad || kDoubleBuffer, "late_q_load moves the double buffer's load");
  static_assert(!kDqRedV4 || (kDqFragOrder && kNTdq % 2 == 0), "dq_red_v4: the warp-ordered accumulator, tile pairs");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory budget exceeded (227 KB)");
  static_assert(kSmemV == kSmemK + kTileKV, "smem_epilogue stages dK over K's tile and dV over V's");
};

// The shipped configurations below and the tuner's candidates (tools/tune) turn options on by
// name: with_flags(o, &BwdOpt::flag...) sets the given bool members of Sm80BwdOptions (dq_red_v4
// needs dq_frag_order as well, the static_assert above checks it).
template <class... Flags>
constexpr Sm80BwdOptions with_flags(Sm80BwdOptions o, Flags... flags) {
  ((o.*flags = true), ...);
  return o;
}
using BwdOpt = Sm80BwdOptions;

// The tiles the library ships (one per head dim; every d, d_v up to it runs on it with
// zero-filled columns), chosen by the A/B of docs/VERSIONS.md (sm80 backward S2), here without
// loop options: the tuner's reference (tools/tune/bwd_candidates.cu). Their shared memory fits an
// A100's 164 KB: D=256 keeps one Q / dO stage (two were slower on the H200 too).
inline constexpr Sm80BwdOptions kSm80BwdD64Tile{.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8,
                                                .sdp_key_warps = 2, .dkv_key_warps = 4, .dq_row_warps = 4};
inline constexpr Sm80BwdOptions kSm80BwdD128Tile{.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8,
                                                 .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2};
// The shipped kernels per mask, each the tuner's fastest at every S it measured in plain mode
// (docs/VERSIONS.md, sm80 part, session 31): all four add into dQ in the warps' order
// (dq_frag_order) and load full query blocks without row tests; the causal ones and the
// non-causal D=64 one branch around the mask; the non-causal D=64 one also computes dQ between
// dV and dK (dq_mid) and keeps lse / dsum in registers (stat_regs), on sm_90+ only (below:
// kSm80BwdD64Sm8x). (Session 32's tuner put the same without dq_mid 1% ahead in plain mode and
// 2% behind in deterministic mode at 16k: not taken, docs/VERSIONS.md.)
inline constexpr Sm80BwdOptions kSm80BwdD64 =
    with_flags(kSm80BwdD64Tile, &BwdOpt::full_block_loads, &BwdOpt::mask_branch, &BwdOpt::dq_mid,
               &BwdOpt::dq_frag_order, &BwdOpt::stat_regs);
inline constexpr Sm80BwdOptions kSm80BwdD64Causal =
    with_flags(kSm80BwdD64Tile, &BwdOpt::full_block_loads, &BwdOpt::mask_branch, &BwdOpt::dq_frag_order);
inline constexpr Sm80BwdOptions kSm80BwdD128 =
    with_flags(kSm80BwdD128Tile, &BwdOpt::full_block_loads, &BwdOpt::dq_frag_order);
inline constexpr Sm80BwdOptions kSm80BwdD128Causal =
    with_flags(kSm80BwdD128Tile, &BwdOpt::full_block_loads, &BwdOpt::mask_branch, &BwdOpt::dq_frag_order);
// Deterministic calls (dQ added in a fixed order per query block) take their own kernel where the
// tuner measured one faster in that mode (docs/VERSIONS.md, sm80 part, session 31): dq_first
// there moves the block's turn release earlier, and at D=128 non-causal dq_mid + stat_regs win.
// D=64 non-causal's plain kernel was also the deterministic mode's fastest.
inline constexpr Sm80BwdOptions kSm80BwdD64CausalDet =
    with_flags(kSm80BwdD64Tile, &BwdOpt::full_block_loads, &BwdOpt::mask_branch, &BwdOpt::dq_first,
               &BwdOpt::dq_frag_order);
inline constexpr Sm80BwdOptions kSm80BwdD128Det =
    with_flags(kSm80BwdD128Tile, &BwdOpt::full_block_loads, &BwdOpt::dq_mid, &BwdOpt::dq_frag_order,
               &BwdOpt::stat_regs);
inline constexpr Sm80BwdOptions kSm80BwdD128CausalDet =
    with_flags(kSm80BwdD128Tile, &BwdOpt::full_block_loads, &BwdOpt::dq_first, &BwdOpt::dq_frag_order);
// D=64 non-causal on sm_80..sm_89 parts (A100, A30, A10, L4, L40, RTX 30 / 40): the optionless
// tile. kSm80BwdD64's sm_80 code spills 52 B per thread where the tile's spills none (ptxas 13.0),
// and no Ampere or Ada part was lent to measure which is faster there; the sm_90 code (0 B both)
// is what the tuner measured. bwd_d64.cu and bwd_d64_varlen.cu pick by the device
// (sm80_bwd_d64_tuned).
inline constexpr Sm80BwdOptions kSm80BwdD64Sm8x = kSm80BwdD64Tile;
constexpr bool sm80_bwd_d64_tuned(int sm) { return sm >= 90; }
inline constexpr Sm80BwdOptions kSm80BwdD256Tile{.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8,
                                                 .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                 .dq_passes = 2, .double_buffer = false};
// D=256 adds into dQ in the warps' order: the tuner's fastest in both modes (session 32). The
// varlen twin (kSm80BwdD256Varlen) and the feature kernel (below) stay on the tile: neither ran
// with the option on a GPU.
inline constexpr Sm80BwdOptions kSm80BwdD256 = with_flags(kSm80BwdD256Tile, &BwdOpt::dq_frag_order);
inline constexpr Sm80BwdOptions kSm80BwdD256Varlen = kSm80BwdD256Tile;
// The feature kernels (window / softcap / ALiBi, MaskKind::kLocal): the score pass (window,
// tanh, ALiBi terms) needs registers the single-slice S^T tiles of D=64 / D=128 do not leave
// (ptxas spills), so their S^T tiles are computed in two query slices; D=256 takes the plain
// tiles. All three carry the window-only score pass (0 spills with it, sm_80 and sm_90a).
inline constexpr Sm80BwdOptions kSm80BwdD64Feature{.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8,
                                                   .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 4,
                                                   .sdp_slices = 2, .window_only_pass = true};
inline constexpr Sm80BwdOptions kSm80BwdD128Feature{.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8,
                                                    .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                    .sdp_slices = 2, .window_only_pass = true};
inline constexpr Sm80BwdOptions kSm80BwdD256Feature = with_flags(kSm80BwdD256Tile, &BwdOpt::window_only_pass);

// Small-shared-memory kernels (bwd/select.h picks them): the tiles above need 145-162 KB, more
// than the 99 KB a block may opt into on sm86 / sm89 parts (A10, L4, L40, RTX 30 / 40), where the
// call would otherwise go to the naive reference. Each keeps its head dim's warp-tile shapes where
// the smaller block allows, and is not tuned (no such part was measured).
// D=64: the key block of the A100 kernel with half its query block (Q / dO still double-buffered).
inline constexpr Sm80BwdOptions kSm80BwdD64Small{.head_dim = 64, .block_m = 64, .block_n = 128, .warps = 8,
                                                 .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 4};
// D=128: 64 x 64 with one Q / dO stage (a second one does not fit), the next block's Q / dO
// loading under the dQ GEMM as kSm80BwdD256 does.
inline constexpr Sm80BwdOptions kSm80BwdD128Small{.head_dim = 128, .block_m = 64, .block_n = 64, .warps = 8,
                                                  .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                  .double_buffer = false};
// D=256: one Q / dO stage alone is 64 KB, so 16 keys per CTA (32 do not fit). With one m16 tile
// of keys the S^T and dK / dV phases split queries / columns over the warps, and 8 warps would
// leave an S^T tile 8 queries wide, below the 16 one ldmatrix_x4 of Q covers: 4 warps. Each
// warp's dQ tile is all 64 queries by 64 columns, in two column passes (fewer live registers).
inline constexpr Sm80BwdOptions kSm80BwdD256Small{.head_dim = 256, .block_m = 64, .block_n = 16, .warps = 4,
                                                  .sdp_key_warps = 1, .dkv_key_warps = 1, .dq_row_warps = 1,
                                                  .dq_passes = 2, .double_buffer = false};

// The small tier's feature kernels (window / softcap / ALiBi): the small tiles with the score
// pass in two query slices at D=64 / 128, as the full tier's feature kernels take them for
// registers; D=256's S^T tile is one m16 tile by 16 queries, too narrow to slice: the plain one.
inline constexpr Sm80BwdOptions kSm80BwdD64SmallFeature{.head_dim = 64, .block_m = 64, .block_n = 128, .warps = 8,
                                                        .sdp_key_warps = 4, .dkv_key_warps = 4, .dq_row_warps = 4,
                                                        .sdp_slices = 2, .window_only_pass = true};
inline constexpr Sm80BwdOptions kSm80BwdD128SmallFeature{.head_dim = 128, .block_m = 64, .block_n = 64, .warps = 8,
                                                         .sdp_key_warps = 4, .dkv_key_warps = 2, .dq_row_warps = 2,
                                                         .sdp_slices = 2, .double_buffer = false, .window_only_pass = true};
inline constexpr Sm80BwdOptions kSm80BwdD256SmallFeature = kSm80BwdD256Small;

// A configuration's varlen twin (packed batches, one sequence per blockIdx.z; kernel_args.h
// Sm80BwdVarlenArgs): the same tiles, every varlen branch of the kernel `if constexpr`, so the
// dense kernels keep their code.
template <class Cfg>
struct Sm80BwdVarlen : Cfg {
  static_assert(!Cfg::kVarlen, "already varlen");
  static constexpr bool kVarlen = true;
};

}  // namespace flashattn::sm80
