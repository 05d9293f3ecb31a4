// sm80 backward, head dim 256: the shipped configuration (bwd/config.h kSm80BwdD256), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg256 = Sm80BwdConfig<kSm80BwdD256>;

template <>
Status run_bwd<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_by_mode<BwdCfg256, BwdCfg256, BwdCfg256, BwdCfg256, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_by_mode<BwdCfg256, BwdCfg256, BwdCfg256, BwdCfg256, __half>(p, stream);
}

}  // namespace flashattn::sm80
