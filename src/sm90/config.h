// Sm90FwdConfig: the one traits struct per Hopper forward configuration. Everything the kernel
// needs (tile sizes, smem layout, thread roles, optimisation flags) derives from it here.
#pragma once

#include <cstdint>

namespace flashattn::sm90 {

template <int HeadDim, int BlockN, int Stages, bool Bf16,
          bool IntraWarpgroupOverlap = true, bool PingPong = true, bool Persistent = true,
          int ConsumerWarpgroups = 2>
struct Sm90FwdConfig {
  static constexpr int kHeadDim = HeadDim;
  // Consumer warpgroups x 64 rows (a wgmma is m64). Two or more groups let one group's softmax
  // hide under the others' GEMMs (ping-pong). Three (BlockM 192) for small D, where softmax
  // (MUFU) time is comparable to GEMM time and there are registers to spare.
  static constexpr int kNumConsumerWarpgroups = ConsumerWarpgroups;
  static_assert(kNumConsumerWarpgroups == 2 || kNumConsumerWarpgroups == 3);
  static constexpr int kBlockM = 64 * kNumConsumerWarpgroups;
  static constexpr int kBlockN = BlockN;
  static constexpr int kStages = Stages;
  static constexpr bool kBf16 = Bf16;

  // ---- optimisation flags (each one an ablation switch) ----
  // K and V of a stage have their own full/empty barriers: QK^T(j) starts when K(j) lands,
  // without waiting for V(j), and K's slot is freed as soon as QK^T(j) retires.
  static constexpr bool kSplitKVBarriers = true;  // structural: always on (see docs/sm90-log.md)
  // Issue QK^T(j) and PV(j-1) back to back; softmax(j) runs while PV(j-1) is in flight.
  static constexpr bool kIntraWarpgroupOverlap = IntraWarpgroupOverlap;
  // Named barriers order the two consumer warpgroups' GEMM issue so their softmaxes alternate.
  static constexpr bool kPingPong = PingPong;
  static_assert(!kPingPong || kIntraWarpgroupOverlap, "ping-pong turns are built around the overlapped loop");
  // One CTA per SM striding over tiles: tile i+1's Q/K/V loads overlap tile i's epilogue.
  static constexpr bool kPersistent = Persistent;

  // ---- threads ----
  static constexpr int kNumThreads = 128 * (kNumConsumerWarpgroups + 1);  // + producer warpgroup
  // The producer only computes coordinates; consumers take the rest of the 64K register file.
  static constexpr int kProducerRegs = kNumConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kNumConsumerWarpgroups == 2 ? 240 : 160;
  static_assert(128 * kProducerRegs + 128 * kNumConsumerWarpgroups * kConsumerRegs <= 65536,
                "setmaxnreg split exceeds the 64K register file");

  // ---- smem layout: every tile is a run of (rows x 128 B) boxes with 128B swizzle ----
  static constexpr int kElemBytes = 2;
  static constexpr int kBoxCols = 128 / kElemBytes;  // 64 elements per swizzle span
  static constexpr int kBoxesPerRow = kHeadDim / kBoxCols;
  static_assert(kHeadDim % kBoxCols == 0, "head dim must be a multiple of 64");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "BlockN: k16 steps of PV, wgmma N <= 256");
  static_assert(kBlockM <= 256, "Q is one TMA box per 64 columns: box rows <= 256");
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * kElemBytes;
  static constexpr uint32_t kKVBytes = kBlockN * kHeadDim * kElemBytes;  // one K or V tile
  static constexpr uint32_t kQBoxBytes = kBlockM * 128;
  static constexpr uint32_t kKVBoxBytes = kBlockN * 128;
  static constexpr uint32_t kSmemQ = 0;
  static constexpr uint32_t kSmemK = kSmemQ + kQBytes;
  static constexpr uint32_t kSmemV = kSmemK + kStages * kKVBytes;
  static constexpr uint32_t kSmemBytes = kSmemV + kStages * kKVBytes;
  static constexpr uint32_t kSmemAlign = 1024;  // swizzle repeat: keeps descriptor base offset 0
  static constexpr uint32_t kDynamicSmemBytes = kSmemBytes + kSmemAlign;  // slack to round up the base
  static_assert(kKVBytes % 1024 == 0 && kQBytes % 1024 == 0, "tiles must start on the 1 KiB swizzle repeat");
  static_assert(kDynamicSmemBytes <= 227 * 1024, "exceeds the 227 KiB opt-in smem of sm_90");

  // ---- per-thread fragments ----
  static constexpr int kSRegs = kBlockN / 2;  // S accumulator (m64 x BlockN f32 over 128 threads)
  static constexpr int kORegs = kHeadDim / 2;
  static constexpr int kPSteps = kBlockN / 16;  // k16 steps of PV
};

// The tile-size table: one entry per head dim, each with its reason.
//  D=64 : BlockM 192 (3 consumer groups, 32/160 registers) x BlockN 128, 2 stages, 88 KiB:
//         small D is exp-bound, so a third group's softmax overlaps the other two's GEMMs.
//         Measured +8-18% non-causal and +8-11% causal at S>=4k over 128x128; but causal at
//         S<=1k lost 8% (bigger diagonal waste, fewer tiles), so causal Sq < 2048 keeps 2 groups.
//  D=128: non-causal BlockN 176 (FA3's choice): 208 KiB smem; fewer, longer key tiles amortise
//         the per-tile softmax bookkeeping; S 88 + O 64 + P 44 registers, no spills.
//         Measured +1% at S=1k/4k, +9% at 16k over 128. Causal keeps 128: the diagonal tile
//         wastes less and 128 divides the 128-row query tile.
//  D=256: BlockN 80, 2 stages: Q 64 KiB + 4 x 40 KiB = 224 KiB; O alone is 128 f32 per thread,
//         so S must stay small.
#ifndef FLASHATTN_SM90_D64_CONSUMER_WGS
#define FLASHATTN_SM90_D64_CONSUMER_WGS 3
#endif
template <int HeadDim>
struct Sm90TileTable;
template <>
struct Sm90TileTable<64> {
  static constexpr int kBlockN = 128, kBlockNCausal = 128, kStages = 2;
  static constexpr int kConsumerWarpgroups = FLASHATTN_SM90_D64_CONSUMER_WGS;
  static constexpr int kConsumerWarpgroupsShortCausal = 2, kShortCausalSeqLen = 2048;
};
template <>
struct Sm90TileTable<128> {
  static constexpr int kBlockN = 176, kBlockNCausal = 128, kStages = 2, kConsumerWarpgroups = 2;
  static constexpr int kConsumerWarpgroupsShortCausal = 2, kShortCausalSeqLen = 0;
};
template <>
struct Sm90TileTable<256> {
  static constexpr int kBlockN = 80, kBlockNCausal = 80, kStages = 2, kConsumerWarpgroups = 2;
  static constexpr int kConsumerWarpgroupsShortCausal = 2, kShortCausalSeqLen = 0;
};

}  // namespace flashattn::sm90
