// The instantiated sm80 kernels: one entry per (config, dtype), each with its launch function.
// Dispatch (launcher.cu) picks from the library's list; the tuner (tools/tune) adds its own
// candidate and ablation lists of the same entries.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <span>
#include <string>

#include "common/mask.h"
#include "common/params.h"
#include "flashattn/flashattn.h"
#include "sm80/fwd/config.h"

namespace flashattn::sm80 {

using LaunchFn = Status (*)(const detail::FwdParams&, cudaStream_t);

// The mask kind of a call without a window, softcap or ALiBi (the feature kernels serve those
// with kLocal: AttnParams::has_features).
constexpr MaskKind mask_kind(bool causal) { return causal ? MaskKind::kCausal : MaskKind::kNone; }

struct KernelEntry {
  Sm80FwdOptions options;
  detail::ElemType dtype;
  int smem_bytes;
  // One kernel per mask kind (indexed by MaskKind); null where that kind is not instantiated.
  std::array<LaunchFn, 3> launch;
  // The Sm80FwdPadded kernels (fwd/config.h): they serve any head dims d, d_v up to
  // options.head_dim (the unpadded ones only d == d_v == options.head_dim).
  bool padded = false;
  // The Sm80FwdVarlen kernels (fwd/config.h): they serve packed variable-length batches
  // (FwdParams::varlen()) and nothing else; listed by varlen_kernels(), not library_kernels().
  bool varlen = false;
  // The Sm80FwdFeature kernels (fwd/config.h): the kLocal mask with run-time softcap and ALiBi,
  // for calls that set any of them (AttnParams::has_features); listed by library_feature_kernels(),
  // those that are varlen too by library_varlen_feature_kernels().
  bool feature = false;

  LaunchFn launch_for(MaskKind kind) const { return launch[static_cast<int>(kind)]; }

  // e.g. "d128_m128n64w4_s2" plus "_q" (Q in regs), "_db" (RF double buffer), "_nosw",
  // "_lazykv", "_unfolded", "_nostrided" (StridedLoads), "_nolazyresc" (LazyRescale) for the
  // ablation switches that are off, "_psw" when PrecomputedSwizzle (default off) is on, "_cs"
  // for o_col_split, "_pad"
  // for the padded kernels, "_varlen" for the varlen ones, "_feature" for the feature ones.
  std::string name() const;
};

// Kernels built into the library for dense calls: those dispatch can pick (sm80/tuned_table.h).
std::span<const KernelEntry> library_kernels();

// Kernels built into the library for varlen calls: one padded kernel per kernel head dim and
// dtype, both masks, in the head dim's default configuration (sm80/tuned_table.h
// varlen_kernels).
std::span<const KernelEntry> library_varlen_kernels();

// Kernels built into the library for calls with a window, softcap or ALiBi (dense batches): one
// padded kernel per kernel head dim and dtype, kLocal, in the feature configuration
// (sm80/tuned_table.h feature_kernels).
std::span<const KernelEntry> library_feature_kernels();

// Kernels built into the library for varlen calls with a window, softcap or ALiBi: one padded
// kernel per kernel head dim and dtype, kLocal, in the feature configuration
// (sm80/tuned_table.h varlen_feature_kernels).
std::span<const KernelEntry> library_varlen_feature_kernels();

// Launches entry `e`'s kernel of p's mask kind for `p` (checks that it is instantiated, that it
// serves p's head dims, its layout (dense or varlen) and its features (a feature kernel serves
// exactly the calls with a window, softcap or ALiBi), and the shared-memory opt-in limit of the
// current device).
Status launch_entry(const KernelEntry& e, const detail::FwdParams& p, cudaStream_t stream);

}  // namespace flashattn::sm80

namespace flashattn::detail {
// The kernel sm80_forward would launch for `p` on a device of capability `sm` (major*10+minor):
// the tuned table's row of the kernel head dim (sm80::kernel_head_dim(d, d_v)) for the call's
// sequence-length bucket (max(Sq, Sk); sm80/tuned_select.h), else that head dim's default; the
// padded twin when d or d_v is below the kernel head dim. Null if none is instantiated.
// Varlen calls (p.varlen()) take the kernel head dim's varlen kernel (no tuned rows), calls with
// a window, softcap or ALiBi its feature kernel (no tuned rows either), varlen calls with them its
// varlen feature kernel.
const sm80::KernelEntry* sm80_select(const FwdParams& p, int sm);
}  // namespace flashattn::detail
