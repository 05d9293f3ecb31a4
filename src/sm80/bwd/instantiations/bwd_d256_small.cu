// sm80 backward, head dim 256, small shared memory: bwd/config.h kSm80BwdD256Small, fp16 and bf16,
// both mask kinds, for the devices bwd/select.h puts in the small tier (sm86 / sm89). A unit of
// its own, so the shipped configurations' units compile as before.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg256Small = Sm80BwdConfig<kSm80BwdD256Small>;

template <>
Status run_bwd_small<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg256Small, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg256Small, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_small<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg256Small, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg256Small, __half, MaskKind::kNone>(p, stream);
}

}  // namespace flashattn::sm80
