// sm90 backward, head dim 256 (fp16 and bf16, both mask kinds, and the feature kernel): dK, dV and dQ split by columns between
// the MMA warpgroups (BwdConfig::kSplitD); serves every call with max(D, Dv) in (128, 256].
#include "sm90/bwd/launch.h"

namespace flashattn::sm90 {

template <bool Bf16, MaskKind Kind>
using BwdCfg256 = BwdConfig<256, 64, Bf16, Kind>;

template <>
Status run_bwd<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg256<true, MaskKind::kCausal>, __nv_bfloat16>(p, stream)
                  : launch_bwd<BwdCfg256<true, MaskKind::kNone>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg256<false, MaskKind::kCausal>, __half>(p, stream)
                  : launch_bwd<BwdCfg256<false, MaskKind::kNone>, __half>(p, stream);
}

// Window / softcap / ALiBi (issue 17): the kLocal feature kernel with run-time softcap and ALiBi.
template <bool Bf16>
using BwdFeatureCfg256 = BwdConfig<256, 64, Bf16, MaskKind::kLocal>;

template <>
Status run_bwd_feature<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<BwdFeatureCfg256<true>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_feature<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<BwdFeatureCfg256<false>, __half>(p, stream);
}

}  // namespace flashattn::sm90
