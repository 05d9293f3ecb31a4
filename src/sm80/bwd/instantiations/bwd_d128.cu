// sm80 backward, head dim 128: the shipped configuration (bwd/config.h kSm80BwdD128), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg128 = Sm80BwdConfig<kSm80BwdD128>;

using BwdTiled128 = Sm80BwdTiledConfig<kSm80BwdTiledD128>;
using BwdTiled128Alt = Sm80BwdTiledConfig<kSm80BwdTiledD128Alt>;

template <>
Status run_bwd<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<BwdTiled128, BwdTiled128Alt, BwdCfg128, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<BwdTiled128, BwdTiled128Alt, BwdCfg128, __half>(p, stream);
}

}  // namespace flashattn::sm80
