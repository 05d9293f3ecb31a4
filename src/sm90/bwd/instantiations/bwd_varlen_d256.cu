// sm90 backward of packed variable-length batches, head dim 256 (fp16 and bf16, kNone and kCausal).
#include "sm90/bwd/launch_varlen.h"

namespace flashattn::sm90 {

// The dense head-dim 256 tiles (bwd_d256.cu) with the varlen option.
template <bool Bf16, MaskKind Kind>
using BwdVarlenCfg256 = BwdConfig<256, 64, Bf16, Kind, 2, /*kVarlen=*/true>;

template <>
Status run_bwd_varlen<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg256<true, MaskKind::kCausal>, __nv_bfloat16>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg256<true, MaskKind::kNone>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_varlen<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg256<false, MaskKind::kCausal>, __half>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg256<false, MaskKind::kNone>, __half>(p, stream);
}

// Window / softcap / ALiBi: the dense feature kernel's tiles (bwd_d256.cu) with the varlen option.
template <bool Bf16>
using BwdVarlenFeatureCfg256 = BwdConfig<256, 64, Bf16, MaskKind::kLocal, 2, /*kVarlen=*/true>;

template <>
Status run_bwd_varlen_feature<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg256<true>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_varlen_feature<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg256<false>, __half>(p, stream);
}

}  // namespace flashattn::sm90
