// sm80 backward, head dim 64, varlen (packed) batches: the varlen twins (bwd/config.h
// Sm80BwdVarlen) of the dense plain-mode kernels (kSm80BwdD64 without a mask, kSm80BwdD64Sm8x in
// its place on sm_80..sm_89 devices, kSm80BwdD64Causal with the causal one; deterministic calls
// take them too), and of the feature configuration kSm80BwdD64Feature with the kLocal mask
// (window / softcap / ALiBi), fp16 and bf16.
#include "common/device_info.h"
#include "sm80/bwd/launch_varlen.h"

namespace flashattn::sm80 {
namespace {

using BwdVarlenCfg64 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64>>;
using BwdVarlenCfg64Sm8x = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64Sm8x>>;
using BwdVarlenCfg64Causal = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64Causal>>;
using BwdVarlenFeatureCfg64 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64Feature>>;

template <class Elem>
Status run64(const detail::BwdParams& p, cudaStream_t stream) {
  if (p.causal) return launch_bwd_varlen<BwdVarlenCfg64Causal, Elem, MaskKind::kCausal>(p, stream);
  detail::DeviceInfo dev;  // cached since dispatch's lookup
  if (Status st = detail::current_device_info(&dev); !st.ok()) return st;
  return sm80_bwd_d64_tuned(dev.sm()) ? launch_bwd_varlen<BwdVarlenCfg64, Elem, MaskKind::kNone>(p, stream)
                                      : launch_bwd_varlen<BwdVarlenCfg64Sm8x, Elem, MaskKind::kNone>(p, stream);
}

}  // namespace

template <>
Status run_bwd_varlen<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return run64<__nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_varlen<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return run64<__half>(p, stream);
}

template <>
Status run_bwd_varlen_feature<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg64, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_varlen_feature<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg64, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
