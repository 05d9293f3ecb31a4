// Head dim 128, fp16 and bf16 (one translation unit per head dim keeps builds parallel).
#include "sm90/fwd/launch.h"

namespace flashattn::sm90 {

template <>
Status run_fwd<128, false>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_any_mask<128, false>(p, s);
}
template <>
Status run_fwd<128, true>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_any_mask<128, true>(p, s);
}

}  // namespace flashattn::sm90
