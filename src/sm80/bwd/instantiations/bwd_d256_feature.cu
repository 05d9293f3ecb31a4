// sm80 backward, head dim 256, sliding window / softcap / ALiBi: bwd/config.h kSm80BwdD256Feature
// (the optionless tile kSm80BwdD256Tile) with the kLocal mask, fp16 and bf16. A translation
// unit of its own, so the plain kernels' units compile as before.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

template <>
Status run_bwd_feature<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<Sm80BwdConfig<kSm80BwdD256Feature>, __nv_bfloat16, MaskKind::kLocal>(p, stream);
}

template <>
Status run_bwd_feature<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd<Sm80BwdConfig<kSm80BwdD256Feature>, __half, MaskKind::kLocal>(p, stream);
}

}  // namespace flashattn::sm80
