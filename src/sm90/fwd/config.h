// Sm90FwdConfig: the one traits struct per Hopper forward configuration. Everything the kernel
// needs (tile sizes, smem layout, thread roles, optimisation flags) derives from it here.
#pragma once

#include <cstdint>

#include "common/mask.h"
#include "sm90/fwd/ablation.h"

namespace flashattn::sm90 {

// The options of one configuration, as named fields (a C++20 class-type template parameter):
// Sm90FwdConfig<Sm90FwdOptions{.head_dim = 128, .block_n = 128, .split_masked_loop = true}>.
// Each flag is an ablation switch; what it does and why is said where Sm90FwdConfig reads it.
struct Sm90FwdOptions {
  int head_dim = 128;  // columns of Q and K
  int v_dim = 0;       // columns of V and O (0: head_dim), e.g. 128 under q/k 192
  int block_n = 128;
  int stages = 2;
  bool bf16 = true;
  bool overlap = true;  // intra-warpgroup overlap of QK^T(j) and PV(j-1)
  bool pingpong = true;
  bool persistent = true;
  int consumer_wgs = 2;
  bool conditional_rescale = false;
  bool tma_store_epilogue = true;
  bool split_masked_loop = false;
  bool stream_k = false;
  bool double_q = true;
  bool varlen = false;  // packed variable-length batches (cu_seqlens): per-sequence offsets and lengths
  bool softcap = false;  // scores through softcap * tanh(scale * s / softcap) when the call sets one
  MaskKind mask = MaskKind::kNone;  // compile-time: causal and non-causal are separate kernels
  friend constexpr bool operator==(const Sm90FwdOptions&, const Sm90FwdOptions&) = default;
};

template <Sm90FwdOptions O>
struct Sm90FwdConfig {
  static constexpr Sm90FwdOptions kOptions = O;
  static constexpr int kHeadDim = O.head_dim;  // QK^T's reduction length
  static constexpr int kVDim = O.v_dim > 0 ? O.v_dim : O.head_dim;  // PV's N, O's columns
  // Consumer warpgroups x 64 rows (a wgmma is m64). Two or more groups let one group's softmax
  // hide under the others' GEMMs (ping-pong). Three (BlockM 192) for small D, where softmax
  // (MUFU) time is comparable to GEMM time and there are registers to spare.
  static constexpr int kNumConsumerWarpgroups = O.consumer_wgs;
  static_assert(kNumConsumerWarpgroups == 2 || kNumConsumerWarpgroups == 3);
  static constexpr int kBlockM = 64 * kNumConsumerWarpgroups;
  static constexpr int kBlockN = O.block_n;
  static constexpr int kStages = O.stages;
  static constexpr bool kBf16 = O.bf16;
  static constexpr MaskKind kMaskKind = O.mask;

  // ---- optimisation flags (each one an ablation switch) ----
  // Issue QK^T(j) and PV(j-1) back to back; softmax(j) runs while PV(j-1) is in flight.
  static constexpr bool kIntraWarpgroupOverlap = O.overlap;
  // Named barriers order the two consumer warpgroups' GEMM issue so their softmaxes alternate.
  static constexpr bool kPingPong = O.pingpong;
  static_assert(!kPingPong || kIntraWarpgroupOverlap, "ping-pong turns are built around the overlapped loop");
  // Masked and unmasked key tiles in separate loops, so no branch sits between the QK^T wait and
  // the PV wait: with the mask branch there, ptxas hoisted the PV wait above the softmax at the
  // branch's merge (SASS: WARPGROUP.DEPBAR.LE gsb0, 0x0 before the first FMNMX) and the softmax
  // never ran under the PV GEMM. Without the branch the overlap is real, and so is its register
  // cost: configs at the register limit spill with it (V13), hence a per-config flag.
  static constexpr bool kSplitMaskedLoop = O.split_masked_loop;
  // One CTA per SM striding over tiles: tile i+1's Q/K/V loads overlap tile i's epilogue.
  static constexpr bool kPersistent = O.persistent;
  // Stream-K tail (stream_k.h): the tiles of a partial last wave are split along the keys over
  // all CTAs and merged. Non-causal configs only (causal tiles differ in cost; the dynamic
  // longest-first scheduler balances them), so the causal kernels carry none of its code.
  static constexpr bool kStreamK = O.stream_k && O.persistent && !O.varlen && O.mask != MaskKind::kLocal;
  static constexpr bool kLocal = O.mask == MaskKind::kLocal;
  // Softcap (issue 17): S <- tanh(S * scale / softcap) before the mask, the softmax then in
  // units of softcap (scale_log2 = softcap * log2 e): one FMUL and one MUFU.TANH per score.
  // A run-time switch inside the kernel that has it (args.softcap_scale != 0), as is ALiBi there
  // (args.alibi: one FMA per score with the distance to the diagonal).
  static constexpr bool kSoftcap = O.softcap;
  // Softcap configs only: MUFU.TANH and MUFU.EX2 then share MUFU's 16 lanes per SM while the
  // FMA pipe has room, so the softmax can evaluate the exp2 of 1 in kSoftcapPolyExp2Every score
  // registers (a fixed, unrolled subset) with arch::ex2_poly on the FMA pipe; 0 = none. Set by
  // FLASHATTN_SM90_ABL_SOFTCAP_POLY_EXP2 for every softcap kernel, whether or not a call sets a
  // softcap (the kernel serves both).
  static constexpr int kSoftcapPolyExp2Every = O.softcap ? FLASHATTN_SM90_ABL_SOFTCAP_POLY_EXP2 : 0;
  static_assert(kSoftcapPolyExp2Every >= 0, "FLASHATTN_SM90_ABL_SOFTCAP_POLY_EXP2: 0 (off) or N (1 of N registers)");
  // Varlen: tiles of a packed batch (per-sequence row offsets and lengths travel in the work
  // slot). The key block that crosses a sequence's end is loaded shifted back so that it ends
  // on the sequence's last key (keys before the shift's start are masked): no row of another
  // sequence, or past the packed keys, reaches P V, where P = 0 times a NaN would still be NaN.
  static constexpr bool kVarlen = O.varlen;
  // Lazy rescaling (FA4): the running row max is only raised when a tile's max exceeds it by more
  // than kRescaleThreshold (log2 units), so exp2 arguments stay <= 8 and P <= 256 (exact in
  // bf16/fp16 range, harmless in the fp32 sums and O). A warp skips the O rescale when none of its
  // rows moved its max. The final 1/sum and lse use the same (possibly stale) max as the sums.
  static constexpr bool kConditionalRescale = O.conditional_rescale;
  static constexpr float kRescaleThreshold = FLASHATTN_SM90_ABL_RESCALE_THRESHOLD;

  // The next piece is claimed when the loader has issued all but this many key blocks of the
  // current one (scheduler.h, producer.h); -1: when the loader takes the current one. V17 chose 1
  // (docs/VERSIONS.md has the measured alternatives).
  static constexpr int kClaimLead = FLASHATTN_SM90_ABL_CLAIM_LEAD;

  // ---- threads ----
  static constexpr int kNumThreads = 128 * (kNumConsumerWarpgroups + 1);  // + producer warpgroup
  // The producer group (a loader and a scheduler thread) does little arithmetic; consumers take
  // the rest of the 64K register file.
  static constexpr int kProducerRegs = kNumConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kNumConsumerWarpgroups == 2 ? 240 : 160;
  static_assert(128 * kProducerRegs + 128 * kNumConsumerWarpgroups * kConsumerRegs <= 65536,
                "setmaxnreg split exceeds the 64K register file");

  // ---- smem layout: every tile is a run of (rows x kSwizzleBytes) TMA boxes, swizzled ----
  // 128B swizzle when the head dims are multiples of 64 columns. Otherwise (D=96) 64B swizzle:
  // three 32-column boxes, so PV's N = 96 covers whole swizzle atoms of the MN-major V (with
  // 128B, 96 columns would be 1.5 atoms and the kernel had to multiply zero columns up to 128).
  static constexpr int kElemBytes = 2;
  static constexpr int kSwizzleBytes = kHeadDim % 64 == 0 && kVDim % 64 == 0 ? 128 : 64;
  static constexpr int kBoxCols = kSwizzleBytes / kElemBytes;  // elements per swizzle span
  static constexpr int kQKBoxes = kHeadDim / kBoxCols;         // boxes per Q / K row block
  static constexpr int kVBoxes = kVDim / kBoxCols;             // boxes per V / O row block
  static_assert(kHeadDim % kBoxCols == 0 && kVDim % kBoxCols == 0, "head dims: whole swizzle spans");
  static_assert(kVDim <= kHeadDim, "O is staged in the Q slot's boxes (kTmaStoreInQ)");
  static constexpr int kKSteps = kHeadDim / 16;                 // k16 steps of QK^T
  static constexpr int kStepsPerBox = kSwizzleBytes / 32;       // k16 steps inside one swizzled row
  // Rows of 8 x kSwizzleBytes form one swizzle atom: the descriptors' stride byte offset.
  static constexpr uint32_t kAtomBytes = 8 * kSwizzleBytes;
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "BlockN: k16 steps of PV, wgmma N <= 256");
  static_assert(kBlockM <= 256, "Q is one TMA box per span of columns: box rows <= 256");
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * kElemBytes;
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim * kElemBytes;  // one K tile
  static constexpr uint32_t kVBytes = kBlockN * kVDim * kElemBytes;     // one V tile
  static constexpr uint32_t kOBytes = kBlockM * kVDim * kElemBytes;
  static constexpr uint32_t kQBoxBytes = kBlockM * kSwizzleBytes;
  static constexpr uint32_t kKVBoxBytes = kBlockN * kSwizzleBytes;
  static constexpr uint32_t kSmemAlign = 1024;  // swizzle repeat: keeps descriptor base offset 0
  // Whether `bytes` of dynamic smem, plus the slack to align its base, fit the 227 KiB opt-in
  // next to the static barriers.
  static constexpr bool smem_fits(uint32_t bytes) { return bytes + kSmemAlign <= 227 * 1024 - 256; }
  // Two Q buffers (persistent configs with the room): tile i+1's Q loads while tile i runs, so
  // the tile boundary no longer waits for a Q fetch issued when tile i's last QK^T retired.
  static constexpr int kQStages = O.double_q && O.persistent && smem_fits(2 * kQBytes + kStages * (kKBytes + kVBytes)) ? 2 : 1;
  static constexpr uint32_t kSmemQ = 0;  // Q slot s at kSmemQ + s * kQBytes
  static constexpr uint32_t kSmemK = kSmemQ + kQStages * kQBytes;
  static constexpr uint32_t kSmemV = kSmemK + kStages * kKBytes;
  static constexpr uint32_t kSmemMainBytes = kSmemV + kStages * kVBytes;
  // O staging for the TMA-store epilogue: a separate buffer (Q may already hold the next tile's
  // rows in the persistent pipeline), laid out like Q: per consumer group 64 rows x kVBoxes boxes
  // of 64 x kSwizzleBytes, for configs with room for it (D=128, D=96, D=64). Three-group configs
  // take it only when non-causal (stream_k), where it measured faster (V16).
  // Without room for a buffer (D=256; D=128 non-causal at BlockN 160), a group stages its O
  // over its own rows of the tile's Q slot (dead after its last QK^T; the other group reads only
  // its own rows), and the slot goes back to the producer only once the TMA store has read it.
  // With two Q slots the next tile's Q is already in the other one; with one (D=256) it loads
  // after that read, still faster than direct stores (V16).
  static constexpr bool kTmaStoreOwnBuffer = O.tma_store_epilogue && (kNumConsumerWarpgroups == 2 || O.stream_k) &&
                                             smem_fits(kSmemMainBytes + kOBytes);
  static constexpr bool kTmaStoreInQ = O.tma_store_epilogue && kNumConsumerWarpgroups == 2 && !kTmaStoreOwnBuffer;
  static constexpr bool kTmaStoreEpilogue = kTmaStoreOwnBuffer || kTmaStoreInQ;
  static constexpr uint32_t kSmemO = kSmemMainBytes;
  static constexpr uint32_t kOGroupBytes = 64 * kVDim * kElemBytes;  // one consumer group's rows
  static constexpr uint32_t kOBoxBytes = 64 * kSwizzleBytes;
  // Staging address of box c of group g: base + c * kOBoxStride + g * kOGroupStride.
  static constexpr uint32_t kOBoxStride = kTmaStoreInQ ? kQBoxBytes : kOBoxBytes;
  static constexpr uint32_t kOGroupStride = kTmaStoreInQ ? 64 * kSwizzleBytes : kOGroupBytes;
  static constexpr uint32_t kSmemBytes = kSmemMainBytes + (kTmaStoreOwnBuffer ? kOBytes : 0);
  static constexpr uint32_t kDynamicSmemBytes = kSmemBytes + kSmemAlign;  // slack to round up the base
  static_assert(kKBytes % 1024 == 0 && kVBytes % 1024 == 0 && kQBytes % 1024 == 0 && kOBytes % 1024 == 0,
                "tiles must start on the 1 KiB swizzle repeat");
  static_assert(kDynamicSmemBytes <= 227 * 1024, "exceeds the 227 KiB opt-in smem of sm_90");

  // ---- per-thread fragments ----
  static constexpr int kSRegs = kBlockN / 2;  // S accumulator (m64 x BlockN f32 over 128 threads)
  static constexpr int kORegs = kVDim / 2;
  static constexpr int kPSteps = kBlockN / 16;  // k16 steps of PV
};

}  // namespace flashattn::sm90
