// sm80 backward, head dim 128: the shipped configurations (bwd/config.h): kSm80BwdD128 without a
// mask, kSm80BwdD128Causal with the causal one, kSm80BwdD128Det / kSm80BwdD128CausalDet for
// deterministic calls, fp16 and bf16.
#include "sm80/bwd/launch.h"

namespace flashattn::sm80 {
namespace {

using BwdCfg128 = Sm80BwdConfig<kSm80BwdD128>;
using BwdCfg128Causal = Sm80BwdConfig<kSm80BwdD128Causal>;
using BwdCfg128Det = Sm80BwdConfig<kSm80BwdD128Det>;
using BwdCfg128CausalDet = Sm80BwdConfig<kSm80BwdD128CausalDet>;

template <class Elem>
Status run128(const detail::BwdParams& p, cudaStream_t stream) {
  return launch_bwd_by_mode<BwdCfg128, BwdCfg128Det, BwdCfg128Causal, BwdCfg128CausalDet, Elem>(p, stream);
}

}  // namespace

template <>
Status run_bwd<128, true>(const detail::BwdParams& p, cudaStream_t stream) {
  return run128<__nv_bfloat16>(p, stream);
}

template <>
Status run_bwd<128, false>(const detail::BwdParams& p, cudaStream_t stream) {
  return run128<__half>(p, stream);
}

}  // namespace flashattn::sm80
