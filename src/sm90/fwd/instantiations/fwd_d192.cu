// Head dim 192 (and 136..184, and q/k 192 with v 128), fp16 and bf16: one translation unit per head dim.
#include "sm90/fwd/launch.h"

namespace flashattn::sm90 {

template <>
Status run_fwd<192, false>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_any_mask<192, false>(p, s);
}
template <>
Status run_fwd<192, true>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_any_mask<192, true>(p, s);
}

}  // namespace flashattn::sm90
