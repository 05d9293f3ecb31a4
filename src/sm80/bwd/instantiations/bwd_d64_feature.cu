// sm80 backward, head dim 64, sliding window / softcap / ALiBi: the shipped configuration
// (bwd/config.h kSm80BwdD64Feature: the plain tiles in two query slices) with the kLocal mask, fp16 and bf16. A translation unit of its own,
// so the plain kernels' units compile as before.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

template <>
Status run_bwd_feature<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<Sm80BwdConfig<kSm80BwdD64Feature>, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_feature<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<Sm80BwdConfig<kSm80BwdD64Feature>, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
