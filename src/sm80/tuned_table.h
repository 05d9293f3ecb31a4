// What sm80 dispatch can pick, as compile-time data: the tuned table (tuned_table.inc), the
// head-dim defaults for devices the table does not know, and from both the list of kernels the
// library instantiates (fwd/instantiations). A re-tuned table therefore ships its new winners
// without a second list to edit. Plain C++ (no CUDA): the CPU tests check it.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <utility>

#include "common/head_dim.h"
#include "common/params.h"
#include "sm80/fwd/config.h"
#include "sm80/tuned_select.h"

namespace flashattn::sm80 {

namespace tuned_table_detail {
inline constexpr TunedRow kRowsAndSentinel[] = {
#define FLASHATTN_SM80_TUNED(sm, dt, d, causal, max_s, bm, bn, w, sl, qr, db, cs) \
  {sm, detail::ElemType::dt, d, causal, max_s, bm, bn, w, sl, qr, db, cs},
#include "sm80/tuned_table.inc"
#undef FLASHATTN_SM80_TUNED
    // keeps the array non-empty when the table is; not part of kTunedRows
    {0, detail::ElemType::kFloat16, 0, false, 0, 0, 0, 0, 0, false, false, false},
};
}  // namespace tuned_table_detail

// The rows of tuned_table.inc, in file order.
inline constexpr std::span<const TunedRow> kTunedRows{tuned_table_detail::kRowsAndSentinel,
                                                      std::size(tuned_table_detail::kRowsAndSentinel) - 1};
static_assert(tuned_rows_well_formed(kTunedRows),
              "tuned_table.inc: negative max_seqlen, or two rows with the same key and max_seqlen");

// The head dims the family instantiates (ascending). A call runs on the smallest one covering
// both of its head dims (kernel_head_dim), padded where they differ from it.
inline constexpr int kHeadDims[] = {64, 128, 192, 256};

// The kernel head dim of a call with q/k head dim d and v/out head dim d_v: the smallest
// instantiated head dim >= max(d, d_v); 0 when none is (above 256) or a head dim is not positive.
// The tuned table's rows of that head dim serve the call.
constexpr int kernel_head_dim(int d, int d_v) { return covering_head_dim(kHeadDims, d, d_v); }

// A call needs the padded kernels (Sm80FwdPadded) when a head dim differs from its kernel's.
constexpr bool needs_padding(int d, int d_v) {
  const int k = kernel_head_dim(d, d_v);
  return d != k || d_v != k;
}

// Defaults for devices the table does not know (and for calls no row serves), both dtypes and
// masks: the FA2 block shapes, within A100's 163 KB of shared memory, none spilling
// (docs/VERSIONS.md). 192: 6 warps (192 threads, 8 rows a pass) own 96 query rows, one m16 tile
// each as at 256, in 84 KB of shared memory (so it also fits sm86/sm89's 99 KB), 178-214
// registers and no spills (ptxas 13.0). The H200's tuned rows take 64 x 64 with 4 warps and Q in
// registers instead (much faster there, docs/VERSIONS.md; the tile loader idles the threads that
// do not divide a row's 24 chunks), whose shared memory does not fit the 99 KB parts.
constexpr Sm80FwdOptions default_options(int head_dim) {
  switch (head_dim) {
    case 64: return {.head_dim = 64, .block_m = 128, .block_n = 64, .warps = 4};
    case 128: return {.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4};
    case 192: return {.head_dim = 192, .block_m = 96, .block_n = 64, .warps = 6};
    default: return {.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 4};
  }
}

// The kernels of one configuration in one element type: one per listed mask kind; padded: the
// Sm80FwdPadded twin (calls with a head dim below options.head_dim).
struct KernelKey {
  Sm80FwdOptions options;
  detail::ElemType dtype;
  bool mask_none = true, mask_causal = true;
  bool padded = false;
  bool varlen = false;  // the Sm80FwdVarlen kernels (packed batches)
  bool feature = false;  // the Sm80FwdFeature kernels (window, softcap, ALiBi): kLocal mask only
  constexpr bool operator==(const KernelKey&) const = default;
};

namespace tuned_table_detail {
// A configuration and the mask kinds it serves.
struct ConfigMasks {
  Sm80FwdOptions options;
  bool mask_none = false, mask_causal = false;
};

// The configurations of head dim d that a tuned row or the default names, each once in first-
// named order, with the masks of the rows naming it (both for the default); written to out (when
// not null), the count returned (with out null: an upper bound).
constexpr int dispatchable(int d, ConfigMasks* out) {
  int n = 0;
  auto add = [&](const Sm80FwdOptions& o, bool none, bool causal) {
    if (out == nullptr) {
      ++n;
      return;
    }
    int i = 0;
    while (i < n && !(out[i].options == o)) ++i;
    if (i == n) out[n++] = {o};
    out[i].mask_none |= none;
    out[i].mask_causal |= causal;
  };
  for (const TunedRow& r : kTunedRows) {
    if (r.head_dim == d) add(r.options(), !r.causal, r.causal);
  }
  add(default_options(d), true, true);
  return n;
}

template <int D>
constexpr auto dispatchable_configs_with_bound() {
  std::array<ConfigMasks, dispatchable(D, nullptr)> all{};
  const int n = dispatchable(D, all.data());
  return std::pair{all, n};
}
}  // namespace tuned_table_detail

// Every kernel dispatch can pick for head dim D: each configuration a tuned row or the default
// names, with the mask kinds of those rows (both for the default), in both dtypes (fp16 then
// bf16), each once. The library instantiates exactly these (fwd/instantiations/fwd_d*.cu). A
// configuration ships both dtypes even where the table names only one: that keeps each kernel's
// dtype twin in its instantiation unit, and which kernels share a unit changes NVVM's inlining
// order (and so a kernel's PTX) slightly. kPadded: the padded twins of the same list (calls
// whose head dims are below D take the row of D; fwd/instantiations/fwd_d*_padded.cu, units of
// their own for the same reason).
template <int D, bool kPadded = false>
constexpr auto dispatchable_kernels() {
  constexpr auto kConfigs = tuned_table_detail::dispatchable_configs_with_bound<D>();
  std::array<KernelKey, 2 * kConfigs.second> out{};
  for (int i = 0; i < kConfigs.second; ++i) {
    const auto& c = kConfigs.first[i];
    out[2 * i] = {c.options, detail::ElemType::kFloat16, c.mask_none, c.mask_causal, kPadded};
    out[2 * i + 1] = {c.options, detail::ElemType::kBFloat16, c.mask_none, c.mask_causal, kPadded};
  }
  return out;
}

// The varlen kernels of head dim D (fwd/instantiations/fwd_d*_varlen.cu): the default
// configuration only (no tuned rows: a packed batch has no one sequence length to bucket), padded
// (so one kernel serves every d, d_v whose kernel head dim is D), both masks, fp16 then bf16.
// Kept to one configuration since each adds four kernels to the library's size.
template <int D>
constexpr auto varlen_kernels() {
  std::array<KernelKey, 2> out{};
  out[0] = {default_options(D), detail::ElemType::kFloat16, true, true, true, true};
  out[1] = {default_options(D), detail::ElemType::kBFloat16, true, true, true, true};
  return out;
}

// The configuration of the feature kernels (window, softcap, ALiBi) of head dim D, one for every
// device: the head dim's default (FA2's shapes, within every sm80-class device's shared memory),
// except D=128, whose 128 x 64 default sits at 255 registers already and spilled with the
// window's walk; 64 x 64 (the tuned table's short-causal pick there) keeps a margin, and its
// narrower query blocks waste less of a window's edge blocks.
constexpr Sm80FwdOptions feature_options(int head_dim) {
  if (head_dim == 128) return {.head_dim = 128, .block_m = 64, .block_n = 64, .warps = 4};
  return default_options(head_dim);
}

// The feature kernels of head dim D (fwd/instantiations/fwd_d*_feature.cu): the feature
// configuration, padded (every d, d_v whose kernel head dim is D), the kLocal mask only, fp16
// then bf16. One configuration, no tuned rows: windows change the work per query block too much
// for one sequence-length bucket to describe it.
template <int D>
constexpr auto feature_kernels() {
  std::array<KernelKey, 2> out{};
  out[0] = {feature_options(D), detail::ElemType::kFloat16, false, false, true, false, true};
  out[1] = {feature_options(D), detail::ElemType::kBFloat16, false, false, true, false, true};
  return out;
}

// The varlen feature kernels of head dim D (fwd/instantiations/fwd_d*_varlen_feature.cu): packed
// batches with a window, softcap or ALiBi. The feature configuration (its register margin holds
// for the window's walk; the varlen wrapper adds only the sequence's offsets and 16 bytes of
// shared memory), padded, kLocal only, fp16 then bf16: one configuration, like both families it
// combines.
template <int D>
constexpr auto varlen_feature_kernels() {
  std::array<KernelKey, 2> out{};
  out[0] = {feature_options(D), detail::ElemType::kFloat16, false, false, true, true, true};
  out[1] = {feature_options(D), detail::ElemType::kBFloat16, false, false, true, true, true};
  return out;
}

}  // namespace flashattn::sm80
