// sm80 backward: what the family serves, and dispatch over the instantiated head dims.
#include <cstdint>
#include <string>

#include "api/backends.h"
#include "common/device_info.h"
#include "common/head_dim.h"
#include "common/varlen_layout.h"
#include "sm80/bwd/config.h"
#include "sm80/bwd/launch.h"
#include "sm80/bwd/select.h"
#include "sm80/registry.h"

namespace flashattn::detail {
namespace {

constexpr int kBwdHeadDims[] = {64, 128, 256};

// Whether dispatch hands window / softcap / ALiBi calls to the feature kernels
// (bwd_d*_feature.cu). A bring-up switch: off, sm80_supports refuses the features (auto dispatch
// and a forced sm80 leave them to the naive reference) while sm80_backward still runs the
// kernels when called directly, as tests/gpu/test_backward_features.cpp then does; on once
// those tests passed on a device (tests/cpu/test_dispatch.cpp's feature block follows it).
constexpr bool kServeFeatures = true;

// One tier's kernels of a head dim and dtype, by call (bwd/launch.h declares them and
// bwd/instantiations define them).
struct BwdRuns {
  using Run = Status (*)(const BwdParams&, cudaStream_t);
  Run plain, feature, varlen, varlen_feature;
  Run pick(const BwdParams& p) const {
    return p.varlen() ? (p.has_features() ? varlen_feature : varlen) : (p.has_features() ? feature : plain);
  }
};
template <int D, bool Bf16>
constexpr BwdRuns kFullRuns{sm80::run_bwd<D, Bf16>, sm80::run_bwd_feature<D, Bf16>, sm80::run_bwd_varlen<D, Bf16>,
                            sm80::run_bwd_varlen_feature<D, Bf16>};
template <int D, bool Bf16>
constexpr BwdRuns kSmallRuns{sm80::run_bwd_small<D, Bf16>, sm80::run_bwd_small_feature<D, Bf16>,
                             sm80::run_bwd_small_varlen<D, Bf16>, sm80::run_bwd_small_varlen_feature<D, Bf16>};
template <int D, bool Bf16>
const BwdRuns& tier_runs(bool small) {
  return small ? kSmallRuns<D, Bf16> : kFullRuns<D, Bf16>;
}
const BwdRuns& runs_for(int hd, bool bf16, bool small) {
  switch (hd) {
    case 64: return bf16 ? tier_runs<64, true>(small) : tier_runs<64, false>(small);
    case 128: return bf16 ? tier_runs<128, true>(small) : tier_runs<128, false>(small);
    default: return bf16 ? tier_runs<256, true>(small) : tier_runs<256, false>(small);
  }
}

}  // namespace

// Every d, d_v up to 256 runs on the smallest of the 64/128/256 kernels covering both, with
// zero-filled columns (as the forward). Window, softcap and ALiBi run on the feature kernels once
// kServeFeatures is on; varlen (packed) calls on the varlen twins (bwd/launch_varlen.h), with
// those features too.
Status sm80_supports(const BwdParams& p) {
  if (p.varlen()) {
    if (p.cu_k == nullptr)
      return {StatusCode::kNotSupported, "backend sm80: a varlen backward needs both cu_seqlens_q and cu_seqlens_k"};
    if (!varlen_bwd_scratch_fits(p.total_q, p.b, p.hq, p.sq))
      return {StatusCode::kNotSupported, "backend sm80: varlen backward scratch indices exceed 32 bits (total_q " +
                                             std::to_string(p.total_q) + ", num_seqs " + std::to_string(p.b) + ")"};
  }
  if (!kServeFeatures) {
    if (p.has_window())
      return {StatusCode::kNotSupported, "backend sm80: backward for window_size (sliding window) not enabled yet"};
    if (p.softcap > 0.f) return {StatusCode::kNotSupported, "backend sm80: backward for softcap not enabled yet"};
    if (p.alibi_slopes != nullptr) return {StatusCode::kNotSupported, "backend sm80: backward for ALiBi not enabled yet"};
  }
  if (covering_head_dim(kBwdHeadDims, p.d, p.d_v) == 0)
    return {StatusCode::kNotSupported, "backend sm80: no backward kernel for head dims " + std::to_string(p.d) + "/" +
                                           std::to_string(p.d_v) + " (up to 256)"};
  if (p.dtype != ElemType::kFloat16 && p.dtype != ElemType::kBFloat16)
    return {StatusCode::kNotSupported, "backend sm80: dtype must be float16 or bfloat16"};
  if (p.hkv > 65535 || p.b > 65535)
    return {StatusCode::kNotSupported, "backend sm80: backward grid takes at most 65535 kv heads and batches"};
  return Status::Ok();
}

// Precondition: choose_backend picked sm80 for p (device >= 8.0, sm80_supports ok), or p is a
// dense call refused only for its window / softcap / ALiBi while kServeFeatures is off (the
// feature tests run the kernels that way before dispatch serves them).
Status sm80_backward(const BwdParams& p, cudaStream_t stream) {
  DeviceInfo dev;  // cached since dispatch's lookup: no device query here
  if (Status st = current_device_info(&dev); !st.ok()) return st;
  return sm80_backward_for_smem(p, dev.smem_optin, stream);
}

// The kernel set is bwd/select.h's tier for smem_optin: the full tier's tiles are sized for the
// 163-227 KB of A100 / H100 class parts, the small tier's for sm86 / sm89's 99 KB; each tier has
// plain, feature (window / softcap / ALiBi) and varlen kernels. Below the small tier every call
// goes to the naive reference, so it is still answered correctly. Precondition: sm80_backward's,
// and smem_optin at most the current device's (a kernel over the device's limit would not launch).
Status sm80_backward_for_smem(const BwdParams& p, int smem_optin, cudaStream_t stream) {
  const sm80::Sm80BwdTier tier = sm80::sm80_bwd_tier(smem_optin);
  if (tier == sm80::Sm80BwdTier::kNone) return reference_backward(p, stream);
  const int hd = covering_head_dim(kBwdHeadDims, p.d, p.d_v);
  const bool bf16 = p.dtype == ElemType::kBFloat16;
  return runs_for(hd, bf16, tier == sm80::Sm80BwdTier::kSmall).pick(p)(p, stream);
}

}  // namespace flashattn::detail
