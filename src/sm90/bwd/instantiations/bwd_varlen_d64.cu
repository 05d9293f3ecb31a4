// sm90 backward of packed variable-length batches, head dim 64 (fp16 and bf16, kNone and kCausal).
#include "sm90/bwd/launch_varlen.h"

namespace flashattn::sm90 {

// The dense head-dim 64 tiles (bwd_d64.cu) with the varlen option.
template <bool Bf16, MaskKind Kind>
using BwdVarlenCfg64 = BwdConfig<64, 128, Bf16, Kind, 2, /*kVarlen=*/true>;

template <>
Status run_bwd_varlen<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg64<true, MaskKind::kCausal>, __nv_bfloat16>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg64<true, MaskKind::kNone>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_varlen<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd_varlen<BwdVarlenCfg64<false, MaskKind::kCausal>, __half>(p, stream)
                  : launch_bwd_varlen<BwdVarlenCfg64<false, MaskKind::kNone>, __half>(p, stream);
}

// Window / softcap / ALiBi: the dense feature kernel's tiles (bwd_d64.cu) with the varlen option.
template <bool Bf16>
using BwdVarlenFeatureCfg64 = BwdConfig<64, 128, Bf16, MaskKind::kLocal, 2, /*kVarlen=*/true>;

template <>
Status run_bwd_varlen_feature<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg64<true>, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd_varlen_feature<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_varlen<BwdVarlenFeatureCfg64<false>, __half>(p, stream);
}

}  // namespace flashattn::sm90
