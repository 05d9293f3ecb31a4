// Launch wrapper and registry entries of sm80 kernel instantiations; included by the
// instantiation files only (fwd/instantiations, tools/tune).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "sm80/fwd/config.h"
#include "sm80/fwd/kernel.h"
#include "sm80/registry.h"
#include "sm80/tuned_table.h"

namespace flashattn::sm80 {

template <class Cfg, class Elem, MaskKind Kind>
Status launch_fwd(const detail::FwdParams& p, cudaStream_t stream) {
  auto* kernel = [] {
    if constexpr (Cfg::kVarlen && Cfg::kFeature) {
      return &sm80_fwd_varlen_feature_kernel<Cfg, Elem, Kind>;
    } else {
      return &sm80_fwd_kernel<Cfg, Elem, Kind>;
    }
  }();
  // Raising the opt-in limit is cheap and per device; do it every call so multi-GPU works.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (e != cudaSuccess) {
    return {StatusCode::kCudaError,
            std::string("backend sm80: cannot set shared memory size: ") + cudaGetErrorString(e)};
  }
  // Varlen: p.sq is max_seqlen_q and p.b the number of sequences (CTAs past a sequence's
  // queries exit at once).
  const dim3 grid((p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM, p.hq, p.b);
  if constexpr (Cfg::kVarlen) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return Status::Ok();  // no query row at all
  }
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(Sm80FwdParamsOf<Cfg>::from(p));
  e = cudaGetLastError();
  if (e != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("backend sm80: kernel launch: ") + cudaGetErrorString(e)};
  }
  return Status::Ok();
}

// The entry of K's configuration and dtype, with a kernel for each mask kind K lists (only
// those are instantiated); K.padded: the Sm80FwdPadded kernels; K.varlen: their Sm80FwdVarlen
// wrappers (packed batches); K.feature: their Sm80FwdFeature wrappers (kLocal only; over the
// varlen ones when K.varlen too).
template <KernelKey K>
constexpr KernelEntry make_entry() {
  using Dense = std::conditional_t<K.padded, Sm80FwdPadded<Sm80FwdConfig<K.options>>, Sm80FwdConfig<K.options>>;
  using Wrapped = std::conditional_t<K.varlen, Sm80FwdVarlen<Dense>, Dense>;
  using Cfg = std::conditional_t<K.feature, Sm80FwdFeature<Wrapped>, Wrapped>;
  using Elem = std::conditional_t<K.dtype == detail::ElemType::kBFloat16, __nv_bfloat16, __half>;
  KernelEntry e{K.options, K.dtype, Cfg::kSmemBytes, {nullptr, nullptr, nullptr}, K.padded, K.varlen, K.feature};
  if constexpr (K.feature) {
    static_assert(!K.mask_none && !K.mask_causal, "feature kernels run the kLocal mask only");
    e.launch[static_cast<int>(MaskKind::kLocal)] = &launch_fwd<Cfg, Elem, MaskKind::kLocal>;
  }
  if constexpr (K.mask_none) e.launch[static_cast<int>(MaskKind::kNone)] = &launch_fwd<Cfg, Elem, MaskKind::kNone>;
  if constexpr (K.mask_causal) {
    e.launch[static_cast<int>(MaskKind::kCausal)] = &launch_fwd<Cfg, Elem, MaskKind::kCausal>;
  }
  return e;
}

// The entries of a compile-time list of kernels (a std::array of KernelKey), in its order.
template <auto kKeys, std::size_t... I>
std::span<const KernelEntry> make_entries(std::index_sequence<I...>) {
  static const KernelEntry k[] = {make_entry<kKeys[I]>()...};
  return k;
}
template <auto kKeys>
std::span<const KernelEntry> make_entries() {
  static_assert(kKeys.size() > 0, "an empty kernel list");
  return make_entries<kKeys>(std::make_index_sequence<kKeys.size()>{});
}

// Both dtypes of one configuration, both mask kinds, given as a braced Sm80FwdOptions initializer
// (inside namespace flashattn::sm80).
#define FLASHATTN_SM80_ENTRIES(...)                                                         \
  make_entry<KernelKey{Sm80FwdOptions __VA_ARGS__, detail::ElemType::kFloat16}>(),          \
      make_entry<KernelKey{Sm80FwdOptions __VA_ARGS__, detail::ElemType::kBFloat16}>()

}  // namespace flashattn::sm80
