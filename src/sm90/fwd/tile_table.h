// The tile table: which configuration each (head dim, dtype, mask, length class) runs, with the
// reason for every entry, and the build-time ablation switches (ablation.h) applied on top.
// Plain C++ (no CUDA headers), so the CPU tests check the shipped layouts
// (tests/cpu/test_sm90_config.cpp). docs/VERSIONS.md holds the measurements behind each choice.
#pragma once

#include "sm90/fwd/ablation.h"
#include "sm90/fwd/config.h"

namespace flashattn::sm90 {

// The build's ablation switches applied to a table entry.
constexpr Sm90FwdOptions with_ablations(Sm90FwdOptions o) {
  o.overlap = FLASHATTN_SM90_ABL_OVERLAP != 0;
  o.pingpong = FLASHATTN_SM90_ABL_PINGPONG != 0;
  o.persistent = FLASHATTN_SM90_ABL_PERSISTENT != 0;
  if (FLASHATTN_SM90_ABL_COND_RESCALE >= 0) o.conditional_rescale = FLASHATTN_SM90_ABL_COND_RESCALE != 0;
  o.tma_store_epilogue = FLASHATTN_SM90_ABL_TMA_STORE != 0;
  if (FLASHATTN_SM90_ABL_SPLIT_MASKED_LOOP >= 0) o.split_masked_loop = FLASHATTN_SM90_ABL_SPLIT_MASKED_LOOP != 0;
  o.stream_k = o.stream_k && FLASHATTN_SM90_ABL_STREAM_K != 0;
  o.double_q = FLASHATTN_SM90_ABL_DOUBLE_Q != 0;
  return o;
}

// Causal calls with Sq below this run the table's short-causal entry (0: none).
constexpr int short_causal_seqlen(int head_dim) { return head_dim == 64 ? 2048 : 0; }
// Causal calls with Sq at or above this run one CTA per tile instead of the dynamic persistent
// grid (0: never). D=256 (V6): measured faster from 2k, the dynamic grid stays ahead at 1k.
constexpr int causal_one_cta_per_tile_seqlen(int head_dim) { return head_dim == 256 ? 2048 : 0; }

// The entry for head dim `d`. Every non-causal entry takes the stream-K tail (stream_k.h):
// causal tiles differ in cost and the dynamic longest-first scheduler balances them instead.
constexpr Sm90FwdOptions tile_table(int d, bool bf16, bool causal, bool short_causal = false) {
  Sm90FwdOptions o{.head_dim = d, .bf16 = bf16, .stream_k = !causal,
                   .mask = causal ? MaskKind::kCausal : MaskKind::kNone};
  if (d == 64) {
    // BlockM 192 (3 consumer groups, 32/160 registers) x BlockN 128, 2 stages: small D is
    // exp-bound, so a third group's softmax overlaps the other two's GEMMs. Causal with short
    // Sq keeps 2 groups (a bigger diagonal waste and too few tiles with 3). No conditional
    // rescale (V5: slower), no split loops (V13: three groups at 160 registers spill with them).
    o.block_n = 128;
    o.consumer_wgs = causal && short_causal ? 2 : FLASHATTN_SM90_ABL_D64_CONSUMER_WGS;
  } else if (d == 96) {
    // Head dims 72..96: 64B swizzle (config.h), three 32-column boxes per tile, PV at N = 96.
    // Q 24 KiB: two Q slots, 2 stages and the O buffer fit even at BlockN 176. Non-causal
    // BlockN 176: fewer, longer key steps amortise each step's softmax bookkeeping (V25).
    // Causal BlockN 128: divides the 128-row query tile, so the diagonal wastes less. Three
    // consumer groups (as D=64) spilled at BlockN 128 and were no faster at 96/112 (V25).
    o.block_n = causal ? FLASHATTN_SM90_ABL_D96_CAUSAL_BLOCKN : FLASHATTN_SM90_ABL_D96_BLOCKN;
    o.consumer_wgs = FLASHATTN_SM90_ABL_D96_CONSUMER_WGS;
    o.stages = FLASHATTN_SM90_ABL_D96_STAGES;
    o.split_masked_loop = true;
  } else if (d == 128) {
    // BlockN 128, split masked/unmasked loops, two Q slots + 2 x (K, V) = 192 KiB + 32 KiB O
    // staging. Non-causal ran BlockN 176/160 before V16; with the Q slots and the TMA store 128
    // is faster at every length and pads short sequences less. Causal: the diagonal tile
    // wastes less and 128 divides the 128-row query tile. Causal 3 stages fit (V7 ablation).
    o.block_n = causal ? 128 : FLASHATTN_SM90_ABL_D128_BLOCKN;
    o.stages = causal ? FLASHATTN_SM90_ABL_D128_CAUSAL_STAGES : 2;
    o.split_masked_loop = true;
  } else if (d == 192) {
    // Head dim 192 (and 136..184, zero-filled; q/k 192 with v 128): BlockN 112, 2 stages:
    // Q 48 KiB + 4 x 42 KiB = 216 KiB (BlockN 128 would need 240). O is 96 f32 per thread, S 56.
    // No room for a second Q slot or an O buffer: O is staged in the Q slot. Split loops as
    // D=256; no conditional rescale (V20, as D=256).
    o.block_n = FLASHATTN_SM90_ABL_D192_BLOCKN;
    o.split_masked_loop = true;
  } else if (d == 256) {
    // BlockN 80, 2 stages: Q 64 KiB + 4 x 40 KiB = 224 KiB; O alone is 128 f32 per thread, so S
    // must stay small. Split loops (V13, no spill). No conditional rescale: it was 3-4% faster
    // (V5, V20) but P's largest value then is not exactly 1 before rounding, and the max error
    // measured 1.3-1.55x cuDNN's (V20); without it, equal to cuDNN's.
    o.block_n = FLASHATTN_SM90_ABL_D256_BLOCKN;
    o.split_masked_loop = true;
  }
  return with_ablations(o);
}

template <int D, bool Bf16, bool Causal, bool ShortCausal = false>
using TableConfig = Sm90FwdConfig<tile_table(D, Bf16, Causal, ShortCausal)>;

// q/k head dims 136..192 with v's at most 128 (DeepSeek's MLA shape, 192 / 128), dense calls:
// K tiles 192 columns wide, V and O 128, so PV does no work on zero columns (the D=192 kernel
// would multiply 64 of them). Q 48 KiB + 2 x (48 + 32) KiB = 208 KiB: one Q slot, O staged in
// it, BlockN 128 (S and O 64 registers each, as D=128).
constexpr Sm90FwdOptions pair_table_192_128(bool bf16, bool causal) {
  Sm90FwdOptions o = tile_table(192, bf16, causal);
  o.v_dim = 128;
  o.block_n = FLASHATTN_SM90_ABL_D192V128_BLOCKN;
  return with_ablations(o);
}

// Packed variable-length batches: the dense entry (short-causal by the longest query sequence),
// without the stream-K tail: the host cannot see the lengths, and a tail planned for max-length
// sequences splits short sequences' tiles into empty pieces that still merge (docs/VERSIONS.md
// V31: it cost skewed batches more than it gave equal ones).
constexpr Sm90FwdOptions varlen_table(int d, bool bf16, bool causal, bool short_causal = false) {
  Sm90FwdOptions o = tile_table(d, bf16, causal, short_causal);
  o.varlen = true;
  o.stream_k = false;
  // D=96 non-causal's BlockN 176 was chosen on dense calls; varlen keeps 128 until it is timed
  // on packed batches (shorter sequences pad less with 128).
  if (d == 96) o.block_n = 128;
  return o;
}

// Sliding window and softcap (issue 17): the causal entry's tiles with the kLocal mask (masked
// tiles at both ends of a window, the ones left of it never loaded) and the softcap switch; no
// stream-K. One kernel per head dim and dtype serves windows, causal windows and softcap with
// or without a window (an unbounded window masks only the padding).
constexpr Sm90FwdOptions feature_table(int d, bool bf16) {
  Sm90FwdOptions o = tile_table(d, bf16, true);
  o.mask = MaskKind::kLocal;
  o.softcap = true;
  o.stream_k = false;
  // D=64: two consumer groups (240 registers each); three at 160 spilled 32 bytes with the
  // window bounds and the softcap switch.
  if (d == 64) o.consumer_wgs = 2;
  return o;
}
template <int D, bool Bf16>
using FeatureConfig = Sm90FwdConfig<feature_table(D, Bf16)>;

// Softcap or ALiBi without a window on a dense call (issue 17): the dense entry itself with the
// softcap and ALiBi switches, so such calls keep what the dense kernels have and the feature
// kernel gives up for its window walk: the kCausal / kNone mask, the stream-K tail of
// non-causal calls and, at D=64, three consumer groups. D=64 and D=128 (the head dims the
// issue's bars name; sm90/launcher.cu): the others run these calls on the feature kernel.
constexpr Sm90FwdOptions score_mod_table(int d, bool bf16, bool causal, bool short_causal = false) {
  Sm90FwdOptions o = tile_table(d, bf16, causal, short_causal);
  o.softcap = true;
  return o;
}

// A sliding window without softcap or ALiBi on a dense call (issue 17): the causal entry's tiles
// with the kLocal mask and no softcap switch. D=128: the feature kernel's tiles without the
// registers its switches hold. D=64: three consumer groups (BlockM 192), which the feature
// kernel cannot keep beside its switches; a window's tiles compute left + BlockM keys per row
// for left + 1 visible, so 192-row tiles pay off only for wide windows (window_twin_serves).
constexpr Sm90FwdOptions window_table(int d, bool bf16) {
  Sm90FwdOptions o = tile_table(d, bf16, true);
  o.mask = MaskKind::kLocal;
  o.stream_k = false;
  return o;
}
// Whether a dense window-only call runs on the window twin (else on the feature kernel):
// `width` is the keys a row may see (left + right + 1 of the bounded window, at most Sk).
// D=64 wants Sq past the short-causal length (as causal's three groups) and a window of at
// least 2048 keys, where 192-row tiles waste little; the threshold itself is not measured
// (docs/VERSIONS.md V28 has what is).
constexpr bool window_twin_serves(int d, int sq, int64_t width) {
  if (d == 128) return true;
  if (d == 64) return sq >= short_causal_seqlen(64) && width >= 2048;
  return false;
}

// Packed variable-length batches with a window, softcap or ALiBi: the feature entry with the
// varlen option (per-sequence lengths, causal and window bottom-right per sequence, ALiBi's
// batch index the sequence's).
constexpr Sm90FwdOptions feature_varlen_table(int d, bool bf16) {
  Sm90FwdOptions o = feature_table(d, bf16);
  o.varlen = true;
  return o;
}
template <int D, bool Bf16>
using FeatureVarlenConfig = Sm90FwdConfig<feature_varlen_table(D, Bf16)>;

}  // namespace flashattn::sm90
