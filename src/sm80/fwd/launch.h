// Launch wrapper for one sm80 kernel instantiation; included by the instantiation files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "sm80/fwd/config.h"
#include "sm80/fwd/kernel.h"
#include "sm80/registry.h"

namespace flashattn::sm80 {

template <class Cfg, class Elem>
Status launch_fwd(const detail::FwdParams& p, cudaStream_t stream) {
  auto* kernel = &sm80_fwd_kernel<Cfg, Elem>;
  // Raising the opt-in limit is cheap and per device; do it every call so multi-GPU works.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (e != cudaSuccess) {
    return {StatusCode::kCudaError,
            std::string("backend sm80: cannot set shared memory size: ") + cudaGetErrorString(e)};
  }
  const dim3 grid((p.sq + Cfg::kBlockM - 1) / Cfg::kBlockM, p.hq, p.b);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(Sm80FwdArgs::from(p));
  e = cudaGetLastError();
  if (e != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("backend sm80: kernel launch: ") + cudaGetErrorString(e)};
  }
  return Status::Ok();
}

template <class Cfg, class Elem>
constexpr KernelEntry make_entry() {
  return KernelEntry{Cfg::kHeadDim,     Cfg::kBlockM,         Cfg::kBlockN,
                     Cfg::kWarps,       Cfg::kFragSlice,      Cfg::kQInRegs,
                     Cfg::kRfDoubleBuffer, Cfg::kSwizzle,     Cfg::kEagerKV,
                     Cfg::kFoldedExp2,  Cfg::kPrecomputedSwizzle, Cfg::kStridedLoads,
                     Cfg::kLazyRescale,
                     std::is_same_v<Elem, __nv_bfloat16> ? detail::ElemType::kBFloat16 : detail::ElemType::kFloat16,
                     Cfg::kSmemBytes,   &launch_fwd<Cfg, Elem>};
}

// Both dtypes of one config.
#define FLASHATTN_SM80_ENTRIES(...)                                    \
  ::flashattn::sm80::make_entry<__VA_ARGS__, __half>(),                \
      ::flashattn::sm80::make_entry<__VA_ARGS__, __nv_bfloat16>()

}  // namespace flashattn::sm80
