// The sm80 backward's small-shared-memory tier (sm80/bwd/select.h: the kernels sm86 / sm89 parts
// run) forced on whatever device runs the tests: the public backward's steps with
// detail::sm80_backward_for_smem at sm86's opt-in limit in place of dispatch. Shared by the
// small-tier cases of test_sm80_backward_small.cpp, test_varlen_backward*.cpp and
// test_backward_features.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/validate.h"
#include "common/device_info.h"
#include "flashattn/flashattn.h"
#include "gpu_util.h"
#include "sm80/bwd/select.h"

namespace flashattn::testing {

// What backward(a, st) does on an sm86 / sm89 part when dispatch picks sm80: validation, the
// family's supports(), the small tier's kernels (not the zero_outside_rows fill: no case here
// asks for it).
inline Status small_tier_backward(const BackwardArgs& a, cudaStream_t st) {
  detail::BwdParams p;
  bool empty = false;
  if (Status s = detail::validate_and_convert(a, &p, &empty); !s.ok()) return s;
  if (empty) return {StatusCode::kInternal, "test shapes are never empty"};
  if (a.zero_outside_rows) return {StatusCode::kInternal, "small_tier_backward does not fill outside rows"};
  if (Status s = detail::sm80_supports(p); !s.ok()) return s;
  return detail::sm80_backward_for_smem(p, sm80::kSm86SmemOptin, st);
}

// Why the small tier cannot run here (sm80 not built, or a device below sm86's shared memory),
// or null when it can.
inline const char* small_tier_unavailable() {
  if (!detail::sm80_built()) return "backend sm80 is not built";
  detail::DeviceInfo dev;
  if (!detail::current_device_info(&dev).ok()) return "no device";
  if (dev.sm() < 80 || dev.smem_optin < sm80::kSm86SmemOptin) return "device below sm86's";
  return nullptr;
}

}  // namespace flashattn::testing

// Skips where the small tier cannot run here.
#define REQUIRE_SMALL_TIER()                                                                   \
  do {                                                                                         \
    FLASHATTN_REQUIRE_GPU();                                                                   \
    if (const char* why_ = ::flashattn::testing::small_tier_unavailable()) GTEST_SKIP() << why_; \
    ASSERT_EQ(::flashattn::sm80::sm80_bwd_tier(::flashattn::sm80::kSm86SmemOptin),              \
              ::flashattn::sm80::Sm80BwdTier::kSmall);                                         \
  } while (0)
