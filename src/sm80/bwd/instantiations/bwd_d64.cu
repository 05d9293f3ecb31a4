// sm80 backward, head dim 64: the shipped configurations (bwd/config.h kSm80BwdD64 without a
// mask, kSm80BwdD64Causal with the causal one), fp16 and bf16.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg64 = Sm80BwdConfig<kSm80BwdD64>;
using BwdCfg64Causal = Sm80BwdConfig<kSm80BwdD64Causal>;

template <>
Status run_bwd<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg64Causal, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg64, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg64Causal, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg64, __half, MaskKind::kNone>(p, stream);
}

}  // namespace flashattn::sm80
