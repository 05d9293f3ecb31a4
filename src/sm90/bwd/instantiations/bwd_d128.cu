// sm90 backward, head dim 128 (fp16 and bf16, both mask kinds, and the feature kernel).
#include "sm90/bwd/launch.h"

namespace flashattn::sm90 {

template <bool Bf16, MaskKind Kind>
using BwdCfg128 = BwdConfig<128, 64, Bf16, Kind>;

template <>
Status run_bwd<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg128<true, MaskKind::kCausal>, __nv_bfloat16>(p, stream)
                  : launch_bwd<BwdCfg128<true, MaskKind::kNone>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg128<false, MaskKind::kCausal>, __half>(p, stream)
                  : launch_bwd<BwdCfg128<false, MaskKind::kNone>, __half>(p, stream);
}

// Window / softcap / ALiBi (issue 17): the kLocal feature kernel with run-time softcap and ALiBi.
template <bool Bf16>
using BwdFeatureCfg128 = BwdConfig<128, 64, Bf16, MaskKind::kLocal>;

template <>
Status run_bwd_feature<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<BwdFeatureCfg128<true>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_feature<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<BwdFeatureCfg128<false>, __half>(p, stream);
}

}  // namespace flashattn::sm90
