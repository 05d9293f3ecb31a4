// Sm80FwdConfig: the traits struct of the Ampere-style forward kernel. Every optimization is a
// named compile-time flag of Sm80FwdOptions so an ablation flips a flag; everything else derives
// from it. Sm80FwdOptions is plain C++ (no CUDA), so the registry, the tuned table and the CPU
// tests name configurations with it too.
#pragma once

#include <cstdint>

namespace flashattn::sm80 {

// One kernel configuration, named field by field; written with designated initializers, e.g.
// {.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .rf_double_buffer = true}.
struct Sm80FwdOptions {
  int head_dim = 0, block_m = 0, block_n = 0, warps = 0;
  bool swizzle = true;            // XOR-swizzle 16-B chunks by row%8 (conflict-free ldmatrix)
  bool eager_kv = true;           // GMEM->SMEM double buffering: V(n) under QK, K(n-1) under PV
  int frag_slice = 2;             // k16 steps per SMEM->RF slice; 0 = whole tile at once
  bool q_in_regs = false;         // keep Q's A-fragments resident in registers
  bool rf_double_buffer = false;  // two register stages for ldmatrix slices
  bool folded_exp2 = true;        // exp2(s*scale_log2 - m*scale_log2) as one FFMA
  // ldmatrix addresses from one per-lane base register per operand (Q, K, V): each fragment is
  // base ^ const + const (see swizzle.h) instead of 4 live xor terms per operand. Off by
  // default: in the register-bound shapes ptxas spills in the main loop with it and not
  // without it (counts in docs/VERSIONS.md). On-GPU A/B decides.
  bool precomputed_swizzle = false;
  // K/V cp.async: one running 64-bit source pointer per tensor stepped by a precomputed
  // per-pass stride, no row predicates on tiles known to be full (all but the last key block)
  bool strided_loads = true;
  // online softmax keeps a stale row max (and skips rescaling O) until some row of the warp
  // would see probabilities above 2^8: softmax.h
  bool lazy_rescale = true;
  // O's head-dim columns split over a pair of warps (FlashAttention-2's warps split only rows):
  // warps form (warps / 2) row groups x 2 column halves. Both warps of a pair own the same query
  // rows; each computes S for half of the block's keys, they agree on the row maxima through
  // shared memory, write P there, and each multiplies the whole P by its half of V's columns.
  // Every V fragment then feeds two m16 tiles instead of one: fewer shared-memory bytes per
  // mma at D=256, where 16-row warps leave the kernel bound by shared memory (col_split.h).
  bool o_col_split = false;

  constexpr bool operator==(const Sm80FwdOptions&) const = default;
};

template <Sm80FwdOptions O>
struct Sm80FwdConfig {
  static constexpr Sm80FwdOptions kOptions = O;
  static constexpr int kHeadDim = O.head_dim;
  static constexpr int kBlockM = O.block_m;
  static constexpr int kBlockN = O.block_n;
  static constexpr int kWarps = O.warps;
  static constexpr bool kSwizzle = O.swizzle;
  static constexpr bool kEagerKV = O.eager_kv;
  static constexpr int kFragSlice = O.frag_slice;
  static constexpr bool kQInRegs = O.q_in_regs;
  static constexpr bool kRfDoubleBuffer = O.rf_double_buffer;
  static constexpr bool kFoldedExp2 = O.folded_exp2;
  static constexpr bool kPrecomputedSwizzle = O.precomputed_swizzle;
  static constexpr bool kStridedLoads = O.strided_loads;
  static constexpr bool kLazyRescale = O.lazy_rescale;
  static constexpr bool kColSplit = O.o_col_split;
  // Serves only calls whose head dims are kHeadDim (Sm80FwdPadded below serves the others).
  static constexpr bool kPadded = false;
  // Dense (B, S, H, D) batches; Sm80FwdVarlen below serves packed variable-length ones.
  static constexpr bool kVarlen = false;
  // No window, softcap or ALiBi; Sm80FwdFeature below serves the calls that set them.
  static constexpr bool kFeature = false;

  static constexpr int kThreads = kWarps * 32;
  // Warps split the M dimension only; each warp owns kMTiles consecutive m16 row tiles and
  // reads all of K and V. ColSplit: warp pairs split M, the two warps of a pair the keys of S
  // and the columns of O (kColHalves = 2): each reads half of K and half of V's columns.
  static constexpr int kColHalves = kColSplit ? 2 : 1;
  static constexpr int kWarpsM = kWarps / kColHalves;
  static constexpr int kMTiles = kBlockM / (16 * kWarpsM);
  static constexpr int kWarpRows = kMTiles * 16;
  static constexpr int kNTilesS = kBlockN / 8 / kColHalves;   // n8 tiles of S per m-tile
  static constexpr int kNTilesO = kHeadDim / 8 / kColHalves;  // n8 tiles of O per m-tile
  static constexpr int kKStepsQK = kHeadDim / 16;  // k16 steps of S = Q K^T
  static constexpr int kKStepsPV = kBlockN / 16;   // k16 steps of O += P V
  static constexpr int kSliceQK = (kFragSlice == 0 || kFragSlice > kKStepsQK) ? kKStepsQK : kFragSlice;
  static constexpr int kSlicePV = (kFragSlice == 0 || kFragSlice > kKStepsPV) ? kKStepsPV : kFragSlice;
  static constexpr int kRfStages = kRfDoubleBuffer ? 2 : 1;

  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-B chunks per smem row
  static constexpr int kElemBytes = 2;
  static constexpr int kSmemQ = kBlockM * kHeadDim * kElemBytes;
  static constexpr int kSmemK = kBlockN * kHeadDim * kElemBytes;
  static constexpr int kSmemV = kSmemK;
  // ColSplit: the block's P (BlockM x BlockN), then the pairs' row maxima and row sums
  // (float [2][2][BlockM]: statistic, column half, row).
  static constexpr int kSmemP = kColSplit ? kBlockM * kBlockN * kElemBytes : 0;
  static constexpr int kSmemPairStats = kColSplit ? 2 * 2 * kBlockM * 4 : 0;
  static constexpr int kSmemBytes = kSmemQ + kSmemK + kSmemV + kSmemP + kSmemPairStats;
  // Opt-in shared memory per block on H100/H200; a smaller device's limit (163 KB on A100) is
  // checked at launch (registry.cu launch_entry).
  static constexpr int kSmemLimitSm90 = 227 * 1024;

  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256 || kHeadDim == 192,
                "head dim: the 8-row XOR swizzle needs >= 8 chunks and a multiple of 8 chunks");
  static_assert(kBlockM % (16 * kWarpsM) == 0 && kMTiles >= 1, "BlockM must be a multiple of 16*Warps");
  // ColSplit (col_split.h): a pair needs its own named barrier (ids 1..4); each half of S is
  // whole 16-key K fragments; a P row is 8 16-B chunks (one swizzle period); each half of O is
  // whole 8-chunk swizzle periods of V's rows; the P store and the epilogue rely on the barrier
  // between QK^T and PV (EagerKV) and on Q read from shared memory (the epilogue stages O in Q's
  // rows, which both warps of a pair read); the lane addresses are LaneAddr's.
  static_assert(!kColSplit || (kWarps % 2 == 0 && kWarpsM <= 4 && kBlockN == 64 && kHeadDim % 128 == 0 &&
                               kEagerKV && kLazyRescale && !kQInRegs && !kPrecomputedSwizzle),
                "o_col_split: 2, 4, 6 or 8 warps, BlockN 64, head dim 128 or 256, eager K/V, lazy rescale, "
                "Q in shared memory, no precomputed swizzle");
  static_assert(kBlockN % 16 == 0, "BlockN must be a multiple of 16");
  static_assert(kFragSlice >= 0 && (kFragSlice == 0 || kKStepsPV % kSlicePV == 0),
                "FragSlice must divide the k16 steps");
  static_assert(kKStepsQK % kSliceQK == 0, "FragSlice must divide the QK k16 steps");
  static_assert(!(kRfDoubleBuffer && kFragSlice == 0), "RF double buffering needs a k-slice");
  // Tile loads (swz::LoaderMap): one thread per 16-B chunk of a row, kThreads / kChunksPerRow
  // rows per pass; threads past a whole number of rows idle and a last pass may be partial
  // (D=192: 24 chunks), so the tiles need not split evenly over the threads.
  static_assert(kThreads >= kChunksPerRow, "loader mapping: a row needs one thread per 16-B chunk");
  static_assert(kSmemBytes <= kSmemLimitSm90, "shared memory budget exceeded (227 KB)");
  // PrecomputedSwizzle XORs the chunk bits of full shared-window addresses (swizzle.h): every
  // tile must start 128-B aligned (the smem window itself is declared __align__(128)).
  static_assert(kSmemQ % 128 == 0 && kSmemK % 128 == 0, "tiles must stay 128-B aligned");
  // Accumulator registers per thread (O + S); beyond ~200 fp32 the kernel spills.
  static constexpr int kAccRegs = kMTiles * (kNTilesO + kNTilesS) * 4;
  static_assert(kAccRegs <= 208, "accumulators alone exceed the register budget");
};

// The padded kernel of configuration Cfg: it serves calls whose q/k head dim d or v/out head dim
// d_v is below kHeadDim (any multiples of 8). Tiles stay (rows, kHeadDim): Q/K chunks at or past d
// are zero-filled by cp.async (src-size 0, no global read), so S = Q K^T is exact; V chunks at or
// past d_v feed only O's columns at or past d_v, which the epilogue never stores (fwd/kernel.h
// says what they hold); no load reads past a row's d or d_v. A type of its own, not a flag of
// Sm80FwdOptions, so the unpadded kernels (calls with d == d_v == kHeadDim) keep their names and
// their code: every padded branch is `if constexpr (Cfg::kPadded)`.
template <class Cfg>
struct Sm80FwdPadded : Cfg {
  static_assert(!Cfg::kPadded, "already padded");
  static constexpr bool kPadded = true;
};

// The varlen kernel of configuration Cfg: packed variable-length batches (detail::FwdParams
// with cu_q / cu_k). One CTA per (query block of max_seqlen_q, q head, sequence); each CTA reads
// its sequence's offsets and lengths (clamped: fwd/kernel.h), exits at once when its block starts
// past the sequence's queries, and otherwise runs the dense mainloop with the sequence's lengths
// as the mask's and its first rows as the tensors' origin. Its parameter block is
// Sm80FwdVarlenArgs (fwd/kernel_args.h). A type of its own like Sm80FwdPadded, so the dense
// kernels keep their code: every varlen branch is `if constexpr (Cfg::kVarlen)`. The library
// wraps padded configurations only (one kernel per head dim, dtype and mask serves every d, d_v).
// The sequence's two lengths (q, k) sit in 8 bytes of shared memory past the tiles, read at each
// use in the main loop: in registers through it they made the register-bound shapes spill (d256
// 64x64 causal: 40 B, d128 128x64: 4 B with CUDA 13.0), where the dense kernels read the call's
// lengths from the parameter bank.
template <class Cfg>
struct Sm80FwdVarlen : Cfg {
  static_assert(!Cfg::kVarlen, "already varlen");
  static constexpr bool kVarlen = true;
  static constexpr int kSmemLengths = Cfg::kSmemBytes;  // byte offset of int[2] {len_q, len_k}
  static constexpr int kSmemBytes = Cfg::kSmemBytes + 16;
  static_assert(kSmemBytes <= Cfg::kSmemLimitSm90, "shared memory budget exceeded (227 KB)");
};

// The feature kernel of configuration Cfg (issue 17): sliding windows, softcap and ALiBi, one
// kernel for all three. It runs the MaskKind::kLocal mask (a causal call is the window
// (unbounded, 0), a plain softcap or ALiBi call the unbounded window, which masks only the
// padding): the key blocks it walks are the window's (common/mask.h n_block_range, so blocks left
// of the window are never loaded) and only the blocks at either edge of the window pay for the
// element-wise mask (unmasked_n_block_range). Softcap and ALiBi are run-time switches inside it
// (Sm80FwdFeatureArgs, fwd/kernel_args.h). A type of its own like the two wrappers above, so the
// kNone / kCausal kernels keep their code: every feature branch is `if constexpr (Cfg::kFeature)`.
// The library wraps padded configurations only (one kernel per head dim and dtype serves every
// d, d_v). Over a varlen configuration (Sm80FwdFeature<Sm80FwdVarlen<...>>) it serves packed
// batches with these features: the window and ALiBi's distances take each sequence's own lengths
// (bottom-right per sequence), its parameter block is Sm80FwdVarlenFeatureArgs
// (fwd/kernel_args.h), and its branches are `if constexpr (Cfg::kVarlen && Cfg::kFeature)` or
// nested under both, so the varlen and the dense feature kernels keep their code.
template <class Cfg>
struct Sm80FwdFeature : Cfg {
  static_assert(!Cfg::kFeature, "already a feature kernel");
  static constexpr bool kFeature = true;
};

}  // namespace flashattn::sm80
