// sm80 backward, head dim 256, small shared memory, varlen (packed) batches: the varlen twins
// (bwd/config.h Sm80BwdVarlen) of kSm80BwdD256Small, both mask kinds, and of kSm80BwdD256SmallFeature
// with the kLocal mask (window / softcap / ALiBi), fp16 and bf16, for the small tier (sm86 / sm89).
#include "sm80/bwd/launch_varlen.h"

namespace flashattn::sm80 {

using BwdVarlenCfg256Small = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD256Small>>;
using BwdVarlenFeatureCfg256Small = Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD256SmallFeature>>;

template <>
Status run_bwd_small_varlen<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg256Small, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg256Small, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_small_varlen<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg256Small, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg256Small, __half, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_small_varlen_feature<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg256Small, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_small_varlen_feature<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg256Small, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
