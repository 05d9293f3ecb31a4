// Sliding windows without softcap / ALiBi, head dim 128, fp16 and bf16 (own translation unit).
#include "sm90/fwd/launch.h"

namespace flashattn::sm90 {

template <>
Status run_fwd_window<128, false>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_window_config<128, false>(p, s);
}
template <>
Status run_fwd_window<128, true>(const detail::FwdParams& p, cudaStream_t s) {
  return run_fwd_window_config<128, true>(p, s);
}

}  // namespace flashattn::sm90
