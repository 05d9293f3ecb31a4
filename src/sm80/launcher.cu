// sm80 family entry points: supports() / forward(), dispatching through the tuned table
// (tuned_table.inc) to one instantiated kernel (registry.h).
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <string>

#include "api/backends.h"
#include "common/device_info.h"
#include "sm80/registry.h"
#include "sm80/tuned_select.h"
#include "sm80/tuned_table.h"

namespace flashattn::detail {
namespace {

using sm80::KernelEntry;
using sm80::kTunedRows;
using sm80::Sm80FwdOptions;
using sm80::TunedRow;

// The library's entry of (o, dt) if it has a kernel for the mask kind of `causal`.
const KernelEntry* find_kernel(const Sm80FwdOptions& o, ElemType dt, bool causal) {
  for (const KernelEntry& e : sm80::library_kernels()) {
    if (e.dtype == dt && e.options == o) return e.launch_for(sm80::mask_kind(causal)) ? &e : nullptr;
  }
  return nullptr;
}

// The tuned rows resolved to their kernels once, so dispatch does not rescan the registry on
// every call. The library instantiates every row's kernel (sm80/tuned_table.h); a null entry
// would make dispatch skip the row.
const KernelEntry* tuned_kernel(const TunedRow& r) {
  static const std::array<const KernelEntry*, kTunedRows.size()> resolved = [] {
    std::array<const KernelEntry*, kTunedRows.size()> a{};
    for (std::size_t i = 0; i < a.size(); ++i) {
      const TunedRow& row = kTunedRows[i];
      a[i] = find_kernel(row.options(), row.dtype, row.causal);
    }
    return a;
  }();
  return resolved[static_cast<std::size_t>(&r - kTunedRows.data())];
}

}  // namespace

// The kernel dispatch picks for params on a device of capability `sm` (exposed for the tuner):
// the tuned row of the call's sequence-length bucket (tuned_select.h), else the head dim's default.
const sm80::KernelEntry* sm80_select(const FwdParams& p, int sm) {
  const TunedRow* r = sm80::select_tuned_row(kTunedRows, sm, p.dtype, p.d, p.causal, p.sq, p.sk,
                                             [](const TunedRow& row) { return tuned_kernel(row) != nullptr; });
  if (r != nullptr) return tuned_kernel(*r);
  return find_kernel(sm80::default_options(p.d), p.dtype, p.causal);
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
