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

// The library's entry of (o, dt, padded) if it has a kernel for the mask kind of `causal`.
const KernelEntry* find_kernel(const Sm80FwdOptions& o, ElemType dt, bool causal, bool padded) {
  for (const KernelEntry& e : sm80::library_kernels()) {
    if (e.dtype == dt && e.padded == padded && e.options == o) {
      return e.launch_for(sm80::mask_kind(causal)) ? &e : nullptr;
    }
  }
  return nullptr;
}

// The tuned rows resolved to their kernels (unpadded and padded) once, so dispatch does not
// rescan the registry on every call. The library instantiates every row's kernel and its padded
// twin (sm80/tuned_table.h); a null entry would make dispatch skip the row.
const KernelEntry* tuned_kernel(const TunedRow& r, bool padded) {
  using Resolved = std::array<std::array<const KernelEntry*, 2>, kTunedRows.size()>;
  static const Resolved resolved = [] {
    Resolved a{};
    for (std::size_t i = 0; i < a.size(); ++i) {
      const TunedRow& row = kTunedRows[i];
      for (bool pad : {false, true}) a[i][pad] = find_kernel(row.options(), row.dtype, row.causal, pad);
    }
    return a;
  }();
  return resolved[static_cast<std::size_t>(&r - kTunedRows.data())][padded];
}

// The library's varlen kernel of kernel head dim hd (its default configuration, padded: every
// d, d_v it covers) for dt and the mask kind of `causal`.
const KernelEntry* find_varlen_kernel(int hd, ElemType dt, bool causal) {
  const Sm80FwdOptions o = sm80::default_options(hd);
  for (const KernelEntry& e : sm80::library_varlen_kernels()) {
    if (e.dtype == dt && e.options == o) return e.launch_for(sm80::mask_kind(causal)) ? &e : nullptr;
  }
  return nullptr;
}

// The library's feature kernel (window, softcap, ALiBi) of kernel head dim hd for dt; varlen:
// its varlen twin (packed batches).
const KernelEntry* find_feature_kernel(int hd, ElemType dt, bool varlen) {
  const Sm80FwdOptions o = sm80::feature_options(hd);
  for (const KernelEntry& e : varlen ? sm80::library_varlen_feature_kernels() : sm80::library_feature_kernels()) {
    if (e.dtype == dt && e.options == o) return &e;
  }
  return nullptr;
}

}  // namespace

// The kernel dispatch picks for params on a device of capability `sm` (exposed for the tuner):
// the tuned row of the kernel head dim (the smallest instantiated one covering d and d_v) for
// the call's sequence-length bucket (tuned_select.h), else that head dim's default; padded when
// d or d_v is below the kernel head dim.
const sm80::KernelEntry* sm80_select(const FwdParams& p, int sm) {
  const int hd = sm80::kernel_head_dim(p.d, p.d_v);
  if (hd == 0) return nullptr;
  if (p.has_features()) return find_feature_kernel(hd, p.dtype, p.varlen());
  if (p.varlen()) return find_varlen_kernel(hd, p.dtype, p.causal);
  const bool padded = sm80::needs_padding(p.d, p.d_v);
  const TunedRow* r = sm80::select_tuned_row(
      kTunedRows, sm, p.dtype, hd, p.causal, p.sq, p.sk,
      [padded](const TunedRow& row) { return tuned_kernel(row, padded) != nullptr; });
  if (r != nullptr) return tuned_kernel(*r, padded);
  return find_kernel(sm80::default_options(hd), p.dtype, p.causal, padded);
}

bool sm80_built() { return true; }

// The device's capability (>= 8.0) is choose_backend's check, and p.scale > 0 validation's
// (src/api/backends.h): only what the sm80 kernels add is checked here. Head dims: validation
// admits multiples of 8 in [8, 256] for d and d_v, and every such pair runs, on the smallest
// instantiated head dim covering both (padded where one differs from it); only a pair above the
// largest kernel would be refused. Varlen (packed) calls run on the kernel head dim's varlen
// kernel, under the same head-dim, dtype and grid limits (batch: the number of sequences).
// Windows, softcap and ALiBi run on the head dim's feature kernel, varlen calls with them on its
// varlen twin.
Status sm80_supports(const FwdParams& p) {
  if (p.varlen() && p.cu_k == nullptr) {
    return {StatusCode::kNotSupported, "backend sm80: a varlen call needs both cu_seqlens_q and cu_seqlens_k"};
  }
  if (sm80::kernel_head_dim(p.d, p.d_v) == 0) {
    return {StatusCode::kNotSupported, "backend sm80: head dims d=" + std::to_string(p.d) + ", d_v=" +
                                           std::to_string(p.d_v) + " not served (multiples of 8 from 8 to 256)"};
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
