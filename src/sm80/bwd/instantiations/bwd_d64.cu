// sm80 backward, head dim 64: the shipped configuration (bwd/config.h kSm80BwdD64), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg64 = Sm80BwdConfig<kSm80BwdD64>;

using BwdTiled64 = Sm80BwdTiledConfig<kSm80BwdTiledD64>;
using BwdTiled64Alt1 = Sm80BwdTiledConfig<kSm80BwdTiledD64Alt1>;
using BwdTiled64Alt2 = Sm80BwdTiledConfig<kSm80BwdTiledD64Alt2>;

template <>
Status run_bwd<64, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<__nv_bfloat16, BwdCfg64, BwdTiled64, BwdTiled64Alt1, BwdTiled64Alt2>(p, stream);
}

template <>
Status run_bwd<64, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<__half, BwdCfg64, BwdTiled64, BwdTiled64Alt1, BwdTiled64Alt2>(p, stream);
}

}  // namespace flashattn::sm80
