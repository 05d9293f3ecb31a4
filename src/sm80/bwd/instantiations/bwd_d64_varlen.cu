// sm80 backward, head dim 64, varlen (packed) batches: the varlen twins (bwd/config.h
// Sm80BwdVarlen) of kSm80BwdD64Varlen (the tile without loop options), both mask kinds, and of
// the feature configuration kSm80BwdD64Feature with the kLocal mask (window / softcap / ALiBi),
// fp16 and bf16.
#include "sm80/bwd/launch_varlen.h"

namespace flashattn::sm80 {

using BwdVarlenCfg64 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64Varlen>>;
using BwdVarlenFeatureCfg64 = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64Feature>>;

template <>
Status run_bwd_varlen<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg64, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg64, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_varlen<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg64, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg64, __half, MaskKind::kNone>(p, stream);
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
