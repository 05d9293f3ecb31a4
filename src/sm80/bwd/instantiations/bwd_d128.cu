// sm80 backward, head dim 128: the shipped configurations (bwd/config.h kSm80BwdD128 without a
// mask, kSm80BwdD128Causal with the causal one), fp16 and bf16.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg128 = Sm80BwdConfig<kSm80BwdD128>;
using BwdCfg128Causal = Sm80BwdConfig<kSm80BwdD128Causal>;

template <>
Status run_bwd<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg128Causal, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg128, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg128Causal, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg128, __half, MaskKind::kNone>(p, stream);
}

}  // namespace flashattn::sm80
