// sm80 backward, head dim 128: the shipped configuration (bwd/config.h kSm80BwdD128), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg128 = Sm80BwdConfig<kSm80BwdD128>;

template <>
Status run_bwd<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg128, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg128, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg128, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg128, __half, MaskKind::kNone>(p, stream);
}

}  // namespace flashattn::sm80
