// Compile-time shape of the KV-cache attention kernel (decode/kernel.h) for one covering head dim.
// Decode is memory-bound: the kernel's job is to keep enough K/V bytes in flight, so the table
// below is about bytes per stage and stages per CTA, not about MMA shapes.
#pragma once

namespace flashattn::decode {

template <int kHeadDim_>
struct DecodeConfig {
  static_assert(kHeadDim_ == 64 || kHeadDim_ == 128 || kHeadDim_ == 256, "covering head dims: 64, 128, 256");
  // q/k's d and v's d_v are both padded to this (zero-filled columns, never written).
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  // Packed query rows per CTA: one m16 MMA tile of (query, head-of-group) rows, so that Sq = 1
  // with a GQA group of 4..16 heads fills most of the tile instead of 1 row of 16.
  static constexpr int kBlockM = 16;
  // Warps split V's columns at 256 (O of 16 x 256 fp32 would take 128 registers per lane) and
  // each key block otherwise: every warp owns 16 keys of a block and its own online softmax
  // (m, l, O), merged through shared memory once at the end.
  static constexpr int kWarpsD = kHeadDim == 256 ? 2 : 1;
  static constexpr int kWarpsN = kWarps / kWarpsD;
  static constexpr int kBlockN = 16 * kWarpsN;  // keys per pipeline stage
  static constexpr int kDimsPerWarp = kHeadDim / kWarpsD;
  // Stages: one K + V tile each, 16 KB at D=64 and 32 KB otherwise. kStages - 1 are in flight
  // while one is consumed. 96 KB at D=128/256 fits two CTAs per SM on Hopper (4 x 32 KB in
  // flight per SM; Little's law asks ~25-40 KB at H200's bandwidth and latency) and still one
  // on the 99 KB parts (sm86/89); 64 KB at D=64 fits three.
  static constexpr int kStages = kHeadDim == 64 ? 4 : 3;
  static constexpr int kMinBlocksPerSm = kHeadDim == 64 ? 3 : 2;

  static constexpr int kChunks = kHeadDim / 8;  // 16-B chunks per row
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kTileBytes = kBlockN * kRowBytes;  // one K or V tile
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  // Q (kBlockM x kHeadDim) is staged once in the last stage's slot: it is read into registers
  // before the first refill of that slot (the main loop's first barrier orders the two).
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kQOffset = (kStages - 1) * kStageBytes;

  // End-of-CTA merge of the kWarpsN partial softmaxes (reuses the pipeline's memory): per key
  // warp an fp32 O (kBlockM x kHeadDim, rows padded by 4 floats against bank conflicts), m and l.
  static constexpr int kMergeRowFloats = kHeadDim + 4;
  static constexpr int kMergeOBytes = kWarpsN * kBlockM * kMergeRowFloats * 4;
  static constexpr int kMergeBytes = kMergeOBytes + 2 * kWarpsN * kBlockM * 4;
  static constexpr int kSmemBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;

  // cp.async loader: thread group g (kThreads / kGroups threads) loads the g-th 16-row group of
  // a block, so a thread needs one page lookup per block (page_size is a multiple of 16: a
  // group never straddles two pages). Thread t of a group owns chunk t % kChunks of rows
  // t / kChunks + i * kRowsPerPass.
  static constexpr int kGroups = kBlockN / 16;
  static constexpr int kGroupThreads = kThreads / kGroups;
  static constexpr int kRowsPerPass = kGroupThreads / kChunks;
  static constexpr int kPasses = 16 / kRowsPerPass;

  static_assert(kThreads % kGroups == 0 && kGroupThreads % kChunks == 0, "loader: whole rows per pass");
  static_assert(16 % kRowsPerPass == 0, "loader: whole passes per group");
  static_assert(kQBytes <= kStageBytes, "Q fits one stage slot");
  static_assert(kDimsPerWarp % 16 == 0, "PV: pairs of n8 tiles per warp");
  static_assert(kRowBytes % 128 == 0, "XOR swizzle over 8 chunks needs 128-B rows");
  static_assert(kSmemBytes <= 99 * 1024, "fits the smallest sm_80+ opt-in limit (sm86/89)");
};

}  // namespace flashattn::decode
