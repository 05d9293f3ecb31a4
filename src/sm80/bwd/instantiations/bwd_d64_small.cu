// sm80 backward, head dim 64, small shared memory: bwd/config.h kSm80BwdD64Small, fp16 and bf16,
// both mask kinds, for the devices bwd/select.h puts in the small tier (sm86 / sm89). A unit of
// its own, so the shipped configurations' units compile as before.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg64Small = Sm80BwdConfig<kSm80BwdD64Small>;

template <>
Status run_bwd_small<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg64Small, __nv_bfloat16, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg64Small, __nv_bfloat16, MaskKind::kNone>(p, stream);
}

template <>
Status run_bwd_small<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return p.causal ? launch_bwd<BwdCfg64Small, __half, MaskKind::kCausal>(p, stream)
                  : launch_bwd<BwdCfg64Small, __half, MaskKind::kNone>(p, stream);
}

}  // namespace flashattn::sm80
