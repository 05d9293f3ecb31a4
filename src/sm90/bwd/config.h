// Compile-time configuration of the sm90 backward kernel: tile sizes, shared-memory map, the
// split of the dQ GEMM between the two MMA warpgroups, and the layout of the fp32 dQ
// accumulator the postprocess reads back.
//
// One CTA owns kBlockN keys of one (batch, kv head): warpgroup 0 loads (TMA) and adds dQ into
// the fp32 accumulator (its warp 1, the dQ writer), warpgroups 1 and 2
// each hold 64 of the keys' dK and dV in registers and walk the query blocks of every query head
// of the group. Head dim 256 (kSplitD): 64 x 256 of dK plus dV would not fit one group's
// registers, so both groups take the same 64 keys and split the columns of dK, dV and dQ; each
// computes the full S^T and dP^T itself (the same values in both: 7 GEMM units per block
// instead of 5, but no exchange of P between the groups). Per query block they compute S^T = K Q^T and dP^T = V dO^T (keys as the wgmma M
// side, so P^T and dS^T land in registers in the A-operand layout of dV += P^T dO and
// dK += dS^T Q), and dQ = dS K with dS^T through shared memory.
#pragma once

#include <cstdint>

#include "common/mask.h"

namespace flashattn::sm90 {

template <int kHeadDim_, int kBlockM_, bool kBf16_, MaskKind kMaskKind_, int kStages_ = 2, bool kVarlen_ = false>
struct BwdConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;  // query rows per step
  static constexpr bool kSplitD = kHeadDim > 128;
  // Keys per CTA: 64 per MMA warpgroup, or (kSplitD) 64 shared by both.
  static constexpr int kBlockN = kSplitD ? 64 : 128;
  static constexpr int kGroupKeys = kSplitD ? 0 : 64;  // key offset of group 1 in the block
  // kSplitD: each group's dQ is staged over its own column half of the stage's Q and dO tiles
  // (dead once its dK and dV GEMMs retired; the other group reads only its own half by then),
  // and the dQ writer releases the stage after reducing it: no separate staging buffer.
  static constexpr bool kDqInStage = kSplitD;
  static constexpr bool kBf16 = kBf16_;
  static constexpr MaskKind kMaskKind = kMaskKind_;
  // The feature kernel (issue 17): the sliding window (both edges masked, query blocks bounded on
  // both sides) with run-time softcap and ALiBi switches; its arguments are Sm90BwdFeatureArgs.
  static constexpr bool kLocal = kMaskKind == MaskKind::kLocal;
  static constexpr int kStages = kStages_;  // Q/dO/lse/dsum ring depth
  // Packed variable-length batches (bwd/varlen.h): a CTA per (key block, kv head, sequence), the
  // rows outside its sequence zeroed in shared memory; arguments Sm90BwdVarlenArgs (with kLocal,
  // the feature kernel's varlen twin, Sm90BwdVarlenFeatureArgs).
  static constexpr bool kVarlen = kVarlen_;

  static constexpr int kNumMmaWarpgroups = 2;
  static constexpr int kNumThreads = 128 * (1 + kNumMmaWarpgroups);
  // Causal grids in TileOrder's groups, longest key blocks first (kernel_args.h): off for the
  // split head dim, whose loader and dQ writer (24 registers) spill the decoded block and head.
  static constexpr bool kGroupedOrder = kMaskKind == MaskKind::kCausal && !kSplitD;
  // dS^T stored with stmatrix (one instruction per k-step instead of four 32-bit stores): off for
  // the D=64 window kernel, which spills with it (its 232 MMA registers hold the softcap and
  // ALiBi state too).
  static constexpr bool kStmatrixDs = !(kHeadDim == 64 && kLocal);
  // dK and dV written through the idle Q/dO stages in 16-byte row pieces (mainloop.h
  // store_dkdv); not kSplitD, whose dQ writer may still read the stages at the end, nor the
  // D=64 window kernel (spilled 12 B with it).
  static constexpr bool kStagedDkDv = !kSplitD && !(kHeadDim == 64 && kLocal);
  // The feature kernel's score pass in a second copy without the softcap and ALiBi work, taken
  // by calls with a window alone (bwd/mainloop.h); not at D=64, whose kernel spilled 308 bytes
  // with the second copy.
  static constexpr bool kWindowOnlyPass = kLocal && kHeadDim != 64;
  // Arrivals that free a ring stage: every MMA thread (each after its own reads of the stage's
  // lse and dsum), or kDqInStage the dQ writer once it has read the dQ staged over the stage.
  static constexpr int kRingReleases = kDqInStage ? 1 : 128 * kNumMmaWarpgroups;
  // D=64 (BlockM 128): the dQ writer thread needs more than 24 (its deterministic turn spilled).
  static constexpr int kProducerRegs = kHeadDim == 64 ? 32 : 24;
  static constexpr int kMmaRegs = kHeadDim == 64 ? 232 : 240;
  // setmaxnreg moves registers between the warpgroups of the CTA; it cannot grow the CTA's pool
  // beyond what the launch allocated (168 per thread under __launch_bounds__(384, 1)): a larger
  // sum makes setmaxnreg.inc wait forever (32 + 240 hung the kernel on the H200).
  static_assert(128 * kProducerRegs + 256 * kMmaRegs <= 168 * kNumThreads);

  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head dims 64, 128, 256");
  static_assert(kBlockM == 64 || kBlockM == 128);
  static_assert(!kSplitD || kBlockM == 64, "split head dim: dQ staged in a 64-row stage");

  // 128-byte swizzled tiles are stored as boxes of 64 columns (tma_host.h's encode_bshd).
  static constexpr int kBoxCols = 64;
  static constexpr int kBoxesPerRow = kHeadDim / kBoxCols;
  static constexpr int kKBoxBytes = kBlockN * 128;
  static constexpr int kKBytes = kKBoxBytes * kBoxesPerRow;  // K and V each
  static constexpr int kQBoxBytes = kBlockM * 128;
  static constexpr int kQBytes = kQBoxBytes * kBoxesPerRow;  // Q and dO each, per stage
  // dS^T: kBlockN rows (keys) of kBlockM columns (queries), boxes of 64 queries. Read as the
  // MN-major A operand of dQ = dS K.
  static constexpr int kDsBoxBytes = kBlockN * 128;
  static constexpr int kDsBytes = kDsBoxBytes * (kBlockM / 64);  // one of two buffers
  static constexpr int kDqBytes = kBlockM * kHeadDim * 4;  // fp32 dQ of one step
  static constexpr int kRowStatBytes = kBlockM * 4;        // lse (log2) or dsum of one step

  // Shared-memory map (offsets from a 1 KiB aligned base).
  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + kKBytes;
  static constexpr int kSmemQ = kSmemV + kKBytes;
  static constexpr int kSmemDo = kSmemQ + kStages * kQBytes;
  static constexpr int kSmemDs = kSmemDo + kStages * kQBytes;
  // dS^T alternates between two buffers: a group may store the next block's while the other
  // group's dQ GEMM still reads this one (the next kBarBwdDsReady orders the reuse after that).
  static constexpr int kSmemDq = kSmemDs + 2 * kDsBytes;
  static constexpr int kSmemLse = kSmemDq + (kDqInStage ? 0 : kDqBytes);
  static constexpr int kSmemDsum = kSmemLse + kStages * kRowStatBytes;
  static constexpr int kSmemBytes = kSmemDsum + kStages * kRowStatBytes;
  static constexpr int kSmemAlign = 1024;
  static constexpr int kSmemDynamic = kSmemBytes + kSmemAlign;
  static_assert(kSmemDynamic <= 227 * 1024, "backward tiles exceed the opt-in shared memory");

  // Register tiles of one MMA warpgroup (64 keys).
  static constexpr int kSRegs = kBlockM / 2;    // S^T / dP^T: 64 x kBlockM f32
  static constexpr int kKSteps = kBlockM / 16;  // k16 steps of dV += P^T dO (over queries)
  static constexpr int kAccN = kSplitD ? kHeadDim / 2 : kHeadDim;  // dK / dV columns of a group
  static constexpr int kAccRegs = kAccN / 2;                          // dK or dV: 64 x kAccN f32

  // dQ = dS K split between the two warpgroups: by query rows when kBlockM is 128 (64 rows each,
  // all columns), else by columns (all 64 rows, half the head dim each; halves stay whole boxes).
  static constexpr bool kDqSplitRows = kBlockM == 128;
  static constexpr int kDqN = kDqSplitRows ? kHeadDim : kHeadDim / 2;
  static_assert(kDqSplitRows || kDqN % 64 == 0, "a column half of dQ must be whole 64-column boxes");
  static constexpr int kDqRegs = kDqN / 2;
  static constexpr int kDqVec = kDqN / 8;  // float4s per thread
  __host__ __device__ static constexpr int dq_row0(int wg) { return kDqSplitRows ? 64 * wg : 0; }
  __host__ __device__ static constexpr int dq_col0(int wg) { return kDqSplitRows ? 0 : kDqN * wg; }
  static_assert(!kDqInStage || (kDqN == kAccN && kDqN * kBlockM * 4 == kQBytes),
                "kDqInStage: a group's dQ (64 x D/2 f32) fills its halves of the stage's Q and dO");

  // The fp32 dQ accumulator of one (batch, head, query block) is kBlockM * kHeadDim floats in the
  // order the MMA threads hold them, so that both the shared-memory staging (float4 per thread,
  // consecutive threads adjacent) and the bulk reduction stay conflict-free: float4 number
  // (wg * kDqVec + i) * 128 + t holds thread t's accumulators 4i..4i+3. dq_element maps
  // (float index) -> (row, column) in the block for the postprocess.
  // kDqInStage orders the float4s as (pass, wg, i) instead, pass = the 64-column half of the
  // group's 128 columns: the accumulator is then the stage's Q tile (pass 0 of both groups)
  // followed by its dO tile (pass 1), two contiguous bulk reductions.
  __host__ __device__ static constexpr void dq_element(int f, int* row, int* col) {
    const int r = f & 3;
    const int t = (f >> 2) & 127;
    const int vi = f >> 9;
    int wg = vi / kDqVec, i = vi % kDqVec;  // vi = wg * kDqVec + i
    if (kDqInStage) {                        // vi = (pass * 2 + wg) * 8 + i % 8, i = 8 pass + i % 8
      wg = (vi / 8) % 2;
      i = 8 * (vi / 16) + vi % 8;
    }
    *row = dq_row0(wg) + 16 * (t >> 5) + ((t & 31) >> 2) + 8 * (r >> 1);
    *col = dq_col0(wg) + 8 * i + 2 * (t & 3) + (r & 1);
  }
};

}  // namespace flashattn::sm90
