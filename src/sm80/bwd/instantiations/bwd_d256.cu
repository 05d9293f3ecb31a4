// sm80 backward, head dim 256: the shipped configuration (bwd/config.h kSm80BwdD256), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg256 = Sm80BwdConfig<kSm80BwdD256>;

using BwdTiled256 = Sm80BwdTiledConfig<kSm80BwdTiledD256>;
using BwdTiled256Alt = Sm80BwdTiledConfig<kSm80BwdTiledD256Alt>;

template <>
Status run_bwd<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<BwdTiled256, BwdTiled256Alt, BwdCfg256, __nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<BwdTiled256, BwdTiled256Alt, BwdCfg256, __half>(p, stream);
}

}  // namespace flashattn::sm80
