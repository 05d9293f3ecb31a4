// Sm90FwdConfig: the one traits struct per Hopper forward configuration. Everything the kernel
// needs (tile sizes, smem layout, thread roles, optimisation flags) derives from it here.
#pragma once

#include <cstdint>

#ifndef FLASHATTN_SM90_CLAIM_LEAD
#define FLASHATTN_SM90_CLAIM_LEAD 1
#endif

namespace flashattn::sm90 {

template <int HeadDim, int BlockN, int Stages, bool Bf16,
          bool IntraWarpgroupOverlap = true, bool PingPong = true, bool Persistent = true,
          int ConsumerWarpgroups = 2, bool ConditionalRescale = false, bool TmaStoreEpilogue = false,
          bool SplitMaskedLoop = false, bool StreamK = false, bool DoubleQ = false>
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
  static constexpr bool kSplitKVBarriers = true;  // structural: always on (see docs/VERSIONS.md (sm90 family))
  // Issue QK^T(j) and PV(j-1) back to back; softmax(j) runs while PV(j-1) is in flight.
  static constexpr bool kIntraWarpgroupOverlap = IntraWarpgroupOverlap;
  // Named barriers order the two consumer warpgroups' GEMM issue so their softmaxes alternate.
  static constexpr bool kPingPong = PingPong;
  static_assert(!kPingPong || kIntraWarpgroupOverlap, "ping-pong turns are built around the overlapped loop");
  // Masked and unmasked key tiles in separate loops, so no branch sits between the QK^T wait and
  // the PV wait: with the mask branch there, ptxas hoisted the PV wait above the softmax at the
  // branch's merge (SASS: WARPGROUP.DEPBAR.LE gsb0, 0x0 before the first FMNMX) and the softmax
  // never ran under the PV GEMM. Without the branch the overlap is real, and so is its register
  // cost: configs at the register limit spill with it (V13), hence a per-config flag.
  static constexpr bool kSplitMaskedLoop = SplitMaskedLoop;
  // One CTA per SM striding over tiles: tile i+1's Q/K/V loads overlap tile i's epilogue.
  static constexpr bool kPersistent = Persistent;
  // Stream-K tail (stream_k.h): the tiles of a partial last wave are split along the keys over
  // all CTAs and merged. Non-causal configs only (causal tiles differ in cost; the dynamic
  // longest-first scheduler balances them), so the causal kernels carry none of its code.
  static constexpr bool kStreamK = StreamK && Persistent;
  // Lazy rescaling (FA4): the running row max is only raised when a tile's max exceeds it by more
  // than kRescaleThreshold (log2 units), so exp2 arguments stay <= 8 and P <= 256 (exact in
  // bf16/fp16 range, harmless in the fp32 sums and O). A warp skips the O rescale when none of its
  // rows moved its max. The final 1/sum and lse use the same (possibly stale) max as the sums.
  static constexpr bool kConditionalRescale = ConditionalRescale;
  static constexpr float kRescaleThreshold = 8.f;

  // The next piece is claimed when the loader has issued all but this many key blocks of the
  // current one (scheduler.h); -1: when the loader takes the current one (before V17). V17,
  // causal ours/cuDNN at D=128 1k/2k/4k/16k: -1 1.075/1.077/1.083/1.113, 0 1.058/1.104/1.116/
  // 1.121, 1 1.097/1.102/1.123/1.106, 2 1.084/1.104/1.123/1.137; D=64 and non-causal level.
  static constexpr int kClaimLead = FLASHATTN_SM90_CLAIM_LEAD;

  // ---- threads ----
  static constexpr int kNumThreads = 128 * (kNumConsumerWarpgroups + 1);  // + producer warpgroup
  // The producer group (a loader and a scheduler thread) does little arithmetic; consumers take
  // the rest of the 64K register file.
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
  static constexpr uint32_t kSmemAlign = 1024;  // swizzle repeat: keeps descriptor base offset 0
  // Whether `bytes` of dynamic smem, plus the slack to align its base, fit the 227 KiB opt-in
  // next to the static barriers.
  static constexpr bool smem_fits(uint32_t bytes) { return bytes + kSmemAlign <= 227 * 1024 - 256; }
  // Two Q buffers (persistent configs with the room): tile i+1's Q loads while tile i runs, so
  // the tile boundary no longer waits for a Q fetch issued when tile i's last QK^T retired.
  static constexpr int kQStages = DoubleQ && Persistent && smem_fits(2 * kQBytes + 2 * Stages * kKVBytes) ? 2 : 1;
  static constexpr uint32_t kSmemQ = 0;  // Q slot s at kSmemQ + s * kQBytes
  static constexpr uint32_t kSmemK = kSmemQ + kQStages * kQBytes;
  static constexpr uint32_t kSmemV = kSmemK + kStages * kKVBytes;
  static constexpr uint32_t kSmemMainBytes = kSmemV + kStages * kKVBytes;
  // O staging for the TMA-store epilogue: a separate buffer (Q may already hold the next tile's
  // rows in the persistent pipeline), laid out like Q: per consumer group 64 rows x D/64 boxes of
  // 64 x 128 B, 128B swizzle, for configs with room for it (D=128, D=64). Three-group
  // configs (160 registers) spilled 24 B with it before V16; since then they do not, and it
  // measured +1..+4% non-causal at S <= 8k but -1..-2% causal at S >= 8k (V16), so only the
  // non-causal ones (the StreamK argument: DefaultConfig passes !causal) take it.
  // Without room for a buffer (D=256; D=128 non-causal at BlockN 160), a group stages its O
  // over its own rows of the tile's Q slot (dead after its last QK^T; the other group reads only
  // its own rows), and the slot goes back to the producer only once the TMA store has read it.
  // With two Q slots the next tile's Q is already in the other one; with one (D=256) it loads
  // after that read, which still measured +2..+8% over direct stores at D=256 (V16).
  static constexpr bool kTmaStoreOwnBuffer = TmaStoreEpilogue && (kNumConsumerWarpgroups == 2 || StreamK) &&
                                             smem_fits(kSmemMainBytes + kQBytes);
  static constexpr bool kTmaStoreInQ = TmaStoreEpilogue && kNumConsumerWarpgroups == 2 && !kTmaStoreOwnBuffer;
  static constexpr bool kTmaStoreEpilogue = kTmaStoreOwnBuffer || kTmaStoreInQ;
  static constexpr uint32_t kSmemO = kSmemMainBytes;
  static constexpr uint32_t kOGroupBytes = 64 * kHeadDim * kElemBytes;  // one consumer group's rows
  static constexpr uint32_t kOBoxBytes = 64 * 128;
  // Staging address of box c of group g: base + c * kOBoxStride + g * kOGroupStride.
  static constexpr uint32_t kOBoxStride = kTmaStoreInQ ? kQBoxBytes : kOBoxBytes;
  static constexpr uint32_t kOGroupStride = kTmaStoreInQ ? 64 * 128 : kOGroupBytes;
  static constexpr uint32_t kSmemBytes = kSmemMainBytes + (kTmaStoreOwnBuffer ? kQBytes : 0);
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
//  D=128: BlockN 128, split masked/unmasked loops, two Q slots + 2 x (K, V) = 192 KiB + 32 KiB
//         O staging buffer. Non-causal ran BlockN 176 (FA3's choice) and 160 (2k <= S < 8k)
//         until V16; with the Q slots and the TMA store, 128 measured +1.5..+4% over 160 at
//         2k-8k and +10..+20% at 512-1k (160 pads 1024 keys to 1120, 512 to 640). Causal: the
//         diagonal tile wastes less and 128 divides the 128-row query tile.
//  D=256: BlockN 80, 2 stages: Q 64 KiB + 4 x 40 KiB = 224 KiB; O alone is 128 f32 per thread,
//         so S must stay small.
#ifndef FLASHATTN_SM90_D64_CONSUMER_WGS
#define FLASHATTN_SM90_D64_CONSUMER_WGS 3
#endif
template <int HeadDim>
struct Sm90TileTable;
template <>
struct Sm90TileTable<64> {
  static constexpr int kBlockN = 128, kBlockNCausal = 128, kStages = 2, kStagesCausal = 2;
  static constexpr int kConsumerWarpgroups = FLASHATTN_SM90_D64_CONSUMER_WGS;
  static constexpr int kConsumerWarpgroupsShortCausal = 2, kShortCausalSeqLen = 2048;
  static constexpr bool kConditionalRescale = false;  // V5: -2.5% non-causal 4k
  static constexpr int kCausalOneCtaPerTileSeqLen = 0;  // 0: always dynamic persistent
  // V13: -1..-4% (three groups at 160 registers spill 24 B with the overlap).
  static constexpr bool kSplitMaskedLoop = false, kSplitMaskedLoopCausal = false;
};
#ifndef FLASHATTN_SM90_D128_BLOCKN
#define FLASHATTN_SM90_D128_BLOCKN 128
#endif
#ifndef FLASHATTN_SM90_D128_CAUSAL_STAGES
#define FLASHATTN_SM90_D128_CAUSAL_STAGES 2
#endif
template <>
struct Sm90TileTable<128> {
  static constexpr int kBlockN = FLASHATTN_SM90_D128_BLOCKN, kBlockNCausal = 128, kStages = 2, kConsumerWarpgroups = 2;
  static constexpr int kStagesCausal = FLASHATTN_SM90_D128_CAUSAL_STAGES;  // 3 fits (224 KiB): V7 ablation
  static constexpr int kConsumerWarpgroupsShortCausal = 2, kShortCausalSeqLen = 0;
  static constexpr bool kConditionalRescale = false;  // V5: -2% non-causal, +-1% causal
  static constexpr int kCausalOneCtaPerTileSeqLen = 0;
  // V13: causal (BlockN 128, no spill) +1% at 2k, +3% at 4k, +7% at 16k; non-causal BlockN 160
  // +1.5..+2% at 2k-4k (BlockN 176 spilled 24 B with it and lost 2-6%).
  static constexpr bool kSplitMaskedLoop = true, kSplitMaskedLoopCausal = true;
  // V13-V15 ran BlockN 160 for 2048 <= Sk < 8192 (a second, mid-length kernel) and 176
  // elsewhere; one width since V16.
};
#ifndef FLASHATTN_SM90_D256_BLOCKN
#define FLASHATTN_SM90_D256_BLOCKN 80
#endif
template <>
struct Sm90TileTable<256> {
  static constexpr int kBlockN = FLASHATTN_SM90_D256_BLOCKN, kBlockNCausal = FLASHATTN_SM90_D256_BLOCKN;
  static constexpr int kStages = 2, kStagesCausal = 2, kConsumerWarpgroups = 2;
  static constexpr int kConsumerWarpgroupsShortCausal = 2, kShortCausalSeqLen = 0;
  // V5: O is 128 f32 per thread against 40 scores per key tile, so the skipped O rescale is a
  // large share of the softmax work: +4% causal, +3.5-16% non-causal.
  static constexpr bool kConditionalRescale = true;
  // V6: causal Sq >= this runs one CTA per tile instead of the dynamic persistent grid
  // (V6: with lazy rescale +2% at 2k, +4% 4k, +9% 8k, +5-24% 16k; dynamic stays ahead at 1k).
  static constexpr int kCausalOneCtaPerTileSeqLen = 2048;
  // V13: +2% at 2k, causal and not (no spill).
  static constexpr bool kSplitMaskedLoop = true, kSplitMaskedLoopCausal = true;
};

}  // namespace flashattn::sm90
