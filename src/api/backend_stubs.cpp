// Stand-ins for kernel families left out of this build (FLASHATTN_ARCHS narrowed).
#include "api/backends.h"

namespace flashattn::detail {

#if !FLASHATTN_HAS_SM90
bool sm90_built() { return false; }
Status sm90_supports(const FwdParams&) {
  return {StatusCode::kNotSupported, "backend sm90 is not built (FLASHATTN_ARCHS lacks 90a)"};
}
Status sm90_forward(const FwdParams& p, cudaStream_t) { return sm90_supports(p); }
#endif

#if !FLASHATTN_HAS_SM80
bool sm80_built() { return false; }
Status sm80_supports(const FwdParams&) {
  return {StatusCode::kNotSupported, "backend sm80 is not built (FLASHATTN_ARCHS lacks 80)"};
}
Status sm80_forward(const FwdParams& p, cudaStream_t) { return sm80_supports(p); }
#endif

}  // namespace flashattn::detail
