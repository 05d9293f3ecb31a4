// Head dims 72..96 (64B-swizzled tiles), fp16 and bf16: one translation unit per head dim.
#include "sm90/fwd/launch.h"

namespace flashattn::sm90 {

template <>
Status run_fwd<96, false>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_any_mask<96, false>(p, s);
}
template <>
Status run_fwd<96, true>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_any_mask<96, true>(p, s);
}

}  // namespace flashattn::sm90
