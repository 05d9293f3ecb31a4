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

template <Sm80FwdOptions O, class Elem>
constexpr KernelEntry make_entry() {
  using Cfg = Sm80FwdConfig<O>;
  constexpr bool kBf16 = std::is_same_v<Elem, __nv_bfloat16>;
  return KernelEntry{O, kBf16 ? detail::ElemType::kBFloat16 : detail::ElemType::kFloat16, Cfg::kSmemBytes,
                     &launch_fwd<Cfg, Elem>};
}

// Both dtypes of one configuration, given as a braced Sm80FwdOptions initializer (inside
// namespace flashattn::sm80).
#define FLASHATTN_SM80_ENTRIES(...) \
  make_entry<Sm80FwdOptions __VA_ARGS__, __half>(), make_entry<Sm80FwdOptions __VA_ARGS__, __nv_bfloat16>()

}  // namespace flashattn::sm80
