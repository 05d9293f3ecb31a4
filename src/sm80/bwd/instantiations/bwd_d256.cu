// sm80 backward, head dim 256: the shipped configuration (bwd/config.h kSm80BwdD256), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg256 = Sm80BwdConfig<kSm80BwdD256>;

template <>
Status run_bwd<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg256, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg256, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg256, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg256, __half, MaskKind::kNone>(p, stream);
}

}  // namespace flashattn::sm80
