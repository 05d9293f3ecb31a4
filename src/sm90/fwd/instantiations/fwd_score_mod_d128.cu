// Softcap / ALiBi on the dense kernels, head dim 128, fp16 and bf16 (own translation unit).
#include "sm90/fwd/launch.h"

namespace flashattn::sm90 {

template <>
Status run_fwd_score_mod<128, false>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_score_mod_any_mask<128, false>(p, s);
}
template <>
Status run_fwd_score_mod<128, true>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_score_mod_any_mask<128, true>(p, s);
}

}  // namespace flashattn::sm90
