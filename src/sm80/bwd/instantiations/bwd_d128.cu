// sm80 backward, head dim 128: the shipped configuration (bwd/config.h kSm80BwdD128), fp16 and
// bf16, both mask kinds.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {

using BwdCfg128 = Sm80BwdConfig<kSm80BwdD128>;

using BwdTiled128 = Sm80BwdTiledConfig<kSm80BwdTiledD128>;
using BwdTiled128Alt1 = Sm80BwdTiledConfig<kSm80BwdTiledD128Alt1>;
using BwdTiled128Alt2 = Sm80BwdTiledConfig<kSm80BwdTiledD128Alt2>;

template <>
Status run_bwd<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<__nv_bfloat16, BwdCfg128, BwdTiled128, BwdTiled128Alt1, BwdTiled128Alt2>(p, stream);
}

template <>
Status run_bwd<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_ab<__half, BwdCfg128, BwdTiled128, BwdTiled128Alt1, BwdTiled128Alt2>(p, stream);
}

}  // namespace flashattn::sm80
