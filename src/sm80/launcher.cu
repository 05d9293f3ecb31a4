// sm80 family entry points: supports() / forward(), dispatching through the tuned table
// (tuned_table.inc) to one instantiated kernel (registry.h).
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <iterator>
#include <string>

#include "api/backends.h"
#include "common/device_info.h"
#include "sm80/registry.h"
#include "sm80/tuned_select.h"

namespace flashattn::detail {
namespace {

using sm80::KernelEntry;
using sm80::TunedRow;

[[maybe_unused]] constexpr ElemType kFloat16 = ElemType::kFloat16;
[[maybe_unused]] constexpr ElemType kBFloat16 = ElemType::kBFloat16;

constexpr TunedRow kTuned[] = {
#define FLASHATTN_SM80_TUNED(sm, dt, d, causal, max_s, bm, bn, w, sl, qr, db) \
  {sm, dt, d, causal, max_s, bm, bn, w, sl, qr, db},
#include "sm80/tuned_table.inc"
#undef FLASHATTN_SM80_TUNED
    {0, kFloat16, 0, false, 0, 0, 0, 0, 0, false, false},  // sentinel
};
static_assert(sm80::tuned_rows_well_formed(kTuned),
              "tuned_table.inc: negative max_seqlen, or two rows with the same key and max_seqlen");

// Defaults for devices the table does not know: the FA2 block shapes, all instantiated and
// within A100's 163 KB of shared memory, none spilling (docs/VERSIONS.md).
TunedRow default_row(int head_dim) {
  switch (head_dim) {
    case 64: return {0, kFloat16, 64, false, 0, 128, 64, 4, 2, false, false};
    case 128: return {0, kFloat16, 128, false, 0, 128, 64, 4, 2, false, false};
    default: return {0, kFloat16, 256, false, 0, 64, 64, 4, 2, false, false};
  }
}

const KernelEntry* find_kernel(const TunedRow& r, ElemType dt) {
  for (const KernelEntry& e : sm80::library_kernels()) {
    if (e.dtype == dt && e.options == r.options()) return &e;
  }
  return nullptr;
}

// kTuned's rows resolved to their kernels once (null where the row names a configuration that is
// not instantiated), so dispatch does not rescan the registry on every call.
const KernelEntry* tuned_kernel(const TunedRow& r) {
  static const std::array<const KernelEntry*, std::size(kTuned)> resolved = [] {
    std::array<const KernelEntry*, std::size(kTuned)> a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = find_kernel(kTuned[i], kTuned[i].dtype);
    return a;
  }();
  return resolved[static_cast<std::size_t>(&r - kTuned)];
}

}  // namespace

// The kernel dispatch picks for params on a device of capability `sm` (exposed for the tuner):
// the tuned row of the call's sequence-length bucket (tuned_select.h), else the head dim's default.
const sm80::KernelEntry* sm80_select(const FwdParams& p, int sm) {
  const TunedRow* r = sm80::select_tuned_row(kTuned, sm, p.dtype, p.d, p.causal, p.sq, p.sk,
                                             [](const TunedRow& row) { return tuned_kernel(row) != nullptr; });
  if (r != nullptr) return tuned_kernel(*r);
  return find_kernel(default_row(p.d), p.dtype);
}

bool sm80_built() { return true; }

// The device's capability (>= 8.0) is choose_backend's check, and p.scale > 0 validation's
// (src/api/backends.h): only what the sm80 kernels add is checked here.
Status sm80_supports(const FwdParams& p) {
  if (p.d != 64 && p.d != 128 && p.d != 256) {
    return {StatusCode::kNotSupported, "backend sm80: head dim " + std::to_string(p.d) +
                                           " not instantiated (have 64, 128, 256)"};
  }
  if (p.dtype != ElemType::kFloat16 && p.dtype != ElemType::kBFloat16) {
    return {StatusCode::kNotSupported, "backend sm80: dtype must be float16 or bfloat16"};
  }
  if (p.hq > 65535 || p.b > 65535) {
    return {StatusCode::kNotSupported, "backend sm80: heads and batch must be at most 65535 (grid y/z)"};
  }
  return Status::Ok();
}

// Precondition: choose_backend picked sm80 for p (device >= 8.0, sm80_supports ok).
Status sm80_forward(const FwdParams& p, cudaStream_t stream) {
  DeviceInfo dev;  // cached since dispatch's lookup: no device query here
  if (Status st = current_device_info(&dev); !st.ok()) return st;
  const KernelEntry* e = sm80_select(p, dev.sm());
  if (e == nullptr) return {StatusCode::kInternal, "backend sm80: no kernel for the default configuration"};
  return sm80::launch_entry(*e, p, stream);
}

}  // namespace flashattn::detail
