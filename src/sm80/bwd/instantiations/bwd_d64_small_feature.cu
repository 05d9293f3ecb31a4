// sm80 backward, head dim 64, small shared memory, sliding window / softcap / ALiBi: bwd/config.h
// kSm80BwdD64SmallFeature with the kLocal mask, fp16 and bf16, for the devices bwd/select.h puts
// in the small tier (sm86 / sm89). A unit of its own, so the other units compile as before.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg64SmallFeature = Sm80BwdConfig<kSm80BwdD64SmallFeature>;

template <>
Status run_bwd_small_feature<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<BwdCfg64SmallFeature, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_small_feature<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<BwdCfg64SmallFeature, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
