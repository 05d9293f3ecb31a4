// q/k head dims 136..192 with v's at most 128 (dense calls), fp16 and bf16: the (192, 128) pair
// configuration of tile_table.h in its own translation unit.
#include "sm90/fwd/launch.h"

namespace flashattn::sm90 {

template <bool Bf16>
Status run_fwd_192_128_any_mask(const detail::FwdParams& p, cudaStream_t s) {
  if (p.causal) return launch_fwd<Sm90FwdConfig<pair_table_192_128(Bf16, true)>>(p, s);
  return launch_fwd<Sm90FwdConfig<pair_table_192_128(Bf16, false)>>(p, s);
}

template <>
Status run_fwd_192_128<false>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_192_128_any_mask<false>(p, s);
}
template <>
Status run_fwd_192_128<true>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_192_128_any_mask<true>(p, s);
}

}  // namespace flashattn::sm90
