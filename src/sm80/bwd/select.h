// Which set of sm80 backward kernels a device runs, from its opt-in shared memory per block
// (cudaDevAttrMaxSharedMemoryPerBlockOptin, common/device_info.h). Host and constexpr only, so
// tests/cpu can check the rule without a GPU.
//
// Tiers are per device, not per head dim: every kernel of a tier must fit, so one threshold per
// tier, the largest shared memory among its configurations (bwd/config.h). The parts in the
// field fall far from both thresholds: A100 / A30 / Orin (163 KB) and H100 / H200 (227 KB) take
// the full tier, sm86 / sm89 (99 KB, kSm86SmemOptin) the small one, so a device that would fit
// some full kernels but not all of them (none is known) gets the small tier rather than a mix.
#pragma once

#include <algorithm>

#include "sm80/bwd/config.h"

namespace flashattn::sm80 {

// Opt-in shared memory per block of sm86 / sm89 (and sm120) parts: 99 KB of the SM's 100 KB, the
// rest reserved by the driver. The small configurations are sized to fit it.
inline constexpr int kSm86SmemOptin = 101376;

enum class Sm80BwdTier {
  kFull,   // the A/B-chosen kernels, plain and feature (kSm80BwdD64 / D128 / D256, *Causal and *Feature)
  kSmall,  // kSm80BwdD{64,128,256}Small and *SmallFeature, and their varlen twins
  kNone,   // nothing fits: every call goes to the naive reference
};

// Largest dynamic shared memory (bytes, as launch_bwd requests it: kSmemBytes, no slack) of the
// full tier's kernels, feature kernels included (a full-tier device runs them too).
inline constexpr int kSm80BwdFullSmem =
    std::max({Sm80BwdConfig<kSm80BwdD64>::kSmemBytes, Sm80BwdConfig<kSm80BwdD64Causal>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD64Sm8x>::kSmemBytes, Sm80BwdConfig<kSm80BwdD64CausalDet>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD128Det>::kSmemBytes, Sm80BwdConfig<kSm80BwdD128CausalDet>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD128>::kSmemBytes, Sm80BwdConfig<kSm80BwdD128Causal>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD256>::kSmemBytes, Sm80BwdConfig<kSm80BwdD64Feature>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD128Feature>::kSmemBytes, Sm80BwdConfig<kSm80BwdD256Feature>::kSmemBytes});
// The same for the small tier's kernels (the varlen twins take their configurations' tiles).
inline constexpr int kSm80BwdSmallSmem =
    std::max({Sm80BwdConfig<kSm80BwdD64Small>::kSmemBytes, Sm80BwdConfig<kSm80BwdD128Small>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD256Small>::kSmemBytes, Sm80BwdConfig<kSm80BwdD64SmallFeature>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD128SmallFeature>::kSmemBytes,
              Sm80BwdConfig<kSm80BwdD256SmallFeature>::kSmemBytes});

static_assert(kSm80BwdSmallSmem <= kSm86SmemOptin, "the small tier must fit sm86 / sm89's 99 KB");
static_assert(kSm80BwdFullSmem <= 163 * 1024, "the full tier must fit an A100's 163 KB");

constexpr Sm80BwdTier sm80_bwd_tier(int smem_optin_bytes) {
  if (smem_optin_bytes >= kSm80BwdFullSmem) return Sm80BwdTier::kFull;
  if (smem_optin_bytes >= kSm80BwdSmallSmem) return Sm80BwdTier::kSmall;
  return Sm80BwdTier::kNone;
}

}  // namespace flashattn::sm80
