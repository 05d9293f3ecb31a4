// sm80 backward, head dim 256: the shipped configuration (bwd/config.h kSm80BwdD256), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg256 = Sm80BwdConfig<kSm80BwdD256>;

using BwdTiled256 = Sm80BwdTiledConfig<kSm80BwdTiledD256>;
using BwdTiled256Alt1 = Sm80BwdTiledConfig<kSm80BwdTiledD256Alt1>;
using BwdTiled256Alt2 = Sm80BwdTiledConfig<kSm80BwdTiledD256Alt2>;

template <>
Status run_bwd<256, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<__nv_bfloat16, BwdCfg256, BwdTiled256, BwdTiled256Alt1, BwdTiled256Alt2>(p, stream);
}

template <>
Status run_bwd<256, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<__half, BwdCfg256, BwdTiled256, BwdTiled256Alt1, BwdTiled256Alt2>(p, stream);
}

}  // namespace flashattn::sm80
