// The list of instantiated sm80 kernels and the name / launch helpers of the registry.
#include "sm80/registry.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "common/device_info.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d64();
std::span<const KernelEntry> kernels_d128();
std::span<const KernelEntry> kernels_d192();
std::span<const KernelEntry> kernels_d256();
std::span<const KernelEntry> kernels_d64_padded();
std::span<const KernelEntry> kernels_d128_padded();
std::span<const KernelEntry> kernels_d192_padded();
std::span<const KernelEntry> kernels_d256_padded();
std::span<const KernelEntry> kernels_d64_varlen();
std::span<const KernelEntry> kernels_d128_varlen();
std::span<const KernelEntry> kernels_d192_varlen();
std::span<const KernelEntry> kernels_d256_varlen();
std::span<const KernelEntry> kernels_d64_feature();
std::span<const KernelEntry> kernels_d128_feature();
std::span<const KernelEntry> kernels_d192_feature();
std::span<const KernelEntry> kernels_d256_feature();
std::span<const KernelEntry> kernels_d64_varlen_feature();
std::span<const KernelEntry> kernels_d128_varlen_feature();
std::span<const KernelEntry> kernels_d192_varlen_feature();
std::span<const KernelEntry> kernels_d256_varlen_feature();

std::span<const KernelEntry> library_kernels() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> v;
    for (auto s : {kernels_d64(), kernels_d128(), kernels_d192(), kernels_d256(), kernels_d64_padded(),
                   kernels_d128_padded(), kernels_d192_padded(), kernels_d256_padded()})
      v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  return all;
}

std::span<const KernelEntry> library_varlen_kernels() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> v;
    for (auto s : {kernels_d64_varlen(), kernels_d128_varlen(), kernels_d192_varlen(), kernels_d256_varlen()})
      v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  return all;
}

std::span<const KernelEntry> library_feature_kernels() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> v;
    for (auto s : {kernels_d64_feature(), kernels_d128_feature(), kernels_d192_feature(), kernels_d256_feature()})
      v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  return all;
}

std::span<const KernelEntry> library_varlen_feature_kernels() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> v;
    for (auto s : {kernels_d64_varlen_feature(), kernels_d128_varlen_feature(), kernels_d192_varlen_feature(),
                   kernels_d256_varlen_feature()})
      v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  return all;
}

std::string KernelEntry::name() const {
  const Sm80FwdOptions& o = options;
  char buf[128];
  std::snprintf(buf, sizeof buf, "d%d_m%dn%dw%d_s%d%s%s%s%s%s%s%s%s%s%s%s%s_%s", o.head_dim, o.block_m, o.block_n,
                o.warps, o.frag_slice, o.q_in_regs ? "_q" : "", o.rf_double_buffer ? "_db" : "",
                o.swizzle ? "" : "_nosw", o.eager_kv ? "" : "_lazykv", o.folded_exp2 ? "" : "_unfolded",
                o.precomputed_swizzle ? "_psw" : "", o.strided_loads ? "" : "_nostrided",
                o.lazy_rescale ? "" : "_nolazyresc", o.o_col_split ? "_cs" : "", padded ? "_pad" : "",
                varlen ? "_varlen" : "", feature ? "_feature" : "",
                dtype == detail::ElemType::kBFloat16 ? "bf16" : "fp16");
  return buf;
}

Status launch_entry(const KernelEntry& e, const detail::FwdParams& p, cudaStream_t stream) {
  detail::DeviceInfo dev;  // cached per device (common/device_info.h): no query per launch
  if (!detail::current_device_info(&dev).ok())
    return {StatusCode::kNoDevice, "backend sm80: cannot query the current device"};
  const int optin = dev.smem_optin;
  if (e.smem_bytes > optin) {
    return {StatusCode::kNotSupported, "backend sm80: kernel " + e.name() + " needs " +
                                           std::to_string(e.smem_bytes) + " B shared memory, device allows " +
                                           std::to_string(optin)};
  }
  const int hd = e.options.head_dim;
  if (e.padded ? (p.d > hd || p.d_v > hd) : (p.d != hd || p.d_v != hd)) {
    return {StatusCode::kNotSupported, "backend sm80: kernel " + e.name() + " does not serve head dims d=" +
                                           std::to_string(p.d) + ", d_v=" + std::to_string(p.d_v)};
  }
  if (e.varlen != p.varlen()) {
    return {StatusCode::kNotSupported, "backend sm80: kernel " + e.name() + " does not serve " +
                                           (p.varlen() ? "varlen (packed) calls" : "dense calls")};
  }
  if (e.feature != p.has_features()) {
    return {StatusCode::kNotSupported, "backend sm80: kernel " + e.name() + " does not serve calls " +
                                           (e.feature ? "without" : "with") + " a window, softcap or ALiBi"};
  }
  const MaskKind kind = e.feature ? MaskKind::kLocal : mask_kind(p.causal);
  const LaunchFn launch = e.launch_for(kind);
  if (launch == nullptr) {
    return {StatusCode::kNotSupported, "backend sm80: kernel " + e.name() + " is not instantiated for the " +
                                           (e.feature ? "window" : p.causal ? "causal" : "non-causal") + " mask"};
  }
  return launch(p, stream);
}

}  // namespace flashattn::sm80
