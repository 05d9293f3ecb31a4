// sm80 backward, head dim 256, varlen (packed) batches: the varlen twins (bwd/config.h
// Sm80BwdVarlen) of kSm80BwdD256Varlen (the optionless tile), both mask kinds, and of the feature
// configuration kSm80BwdD256Feature with the kLocal mask (window / softcap / ALiBi), fp16 and bf16.
#include "sm80/bwd/launch_varlen.h"

namespace flashattn::sm80 {

using BwdVarlenCfg256 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD256Varlen>>;
using BwdVarlenFeatureCfg256 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD256Feature>>;

template <>
Status run_bwd_varlen<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg256, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg256, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_varlen<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg256, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg256, __half, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_varlen_feature<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg256, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_varlen_feature<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg256, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
