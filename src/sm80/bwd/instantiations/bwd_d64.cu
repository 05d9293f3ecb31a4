// sm80 backward, head dim 64: the shipped configurations (bwd/config.h): kSm80BwdD64 without a
// mask (kSm80BwdD64Sm8x in its place on sm_80..sm_89 devices), kSm80BwdD64Causal with the causal
// one (kSm80BwdD64CausalDet for deterministic calls), fp16 and bf16.
#include "common/device_info.h"
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {
namespace {

using BwdCfg64 = Sm80BwdConfig<kSm80BwdD64>;
using BwdCfg64Sm8x = Sm80BwdConfig<kSm80BwdD64Sm8x>;
using BwdCfg64Causal = Sm80BwdConfig<kSm80BwdD64Causal>;
using BwdCfg64CausalDet = Sm80BwdConfig<kSm80BwdD64CausalDet>;

template <class Elem>
Status run64(const detail::BwdParams& p, cudaStream_t stream) {
  if (!p.causal) {
    detail::DeviceInfo dev;  // cached since dispatch's lookup
    if (Status st = detail::current_device_info(&dev); !st.ok()) return st;
    if (!sm80_bwd_d64_tuned(dev.sm())) return launch_bwd<BwdCfg64Sm8x, Elem, MaskKind::kNone>(p, stream);
  }
  return launch_bwd_by_mode<BwdCfg64, BwdCfg64, BwdCfg64Causal, BwdCfg64CausalDet, Elem>(p, stream);
}

}  // namespace

template <>
Status run_bwd<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return run64<__nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return run64<__half>(p, stream);
}

}  // namespace flashattn::sm80
