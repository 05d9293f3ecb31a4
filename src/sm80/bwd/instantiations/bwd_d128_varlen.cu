// sm80 backward, head dim 128, varlen (packed) batches: the varlen twins (bwd/config.h
// Sm80BwdVarlen) of the dense plain-mode kernels, kSm80BwdD128 without a mask and
// kSm80BwdD128Causal with the causal one (deterministic calls take them too), and of the feature
// configuration kSm80BwdD128Feature with the kLocal mask (window / softcap / ALiBi), fp16 and bf16.
#include "sm80/bwd/launch_varlen.h"

namespace flashattn::sm80 {

using BwdVarlenCfg128 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD128>>;
using BwdVarlenCfg128Causal = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD128Causal>>;
using BwdVarlenFeatureCfg128 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD128Feature>>;

template <>
Status run_bwd_varlen<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg128Causal, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg128, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_varlen<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg128Causal, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg128, __half, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_varlen_feature<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg128, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_varlen_feature<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg128, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
