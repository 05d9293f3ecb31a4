// Stand-ins for kernel families left out of this build (FLASHATTN_ARCHS narrowed).
#include "api/backends.h"

namespace flashattn::detail {

#if !FLASHATTN_HAS_SM90
bool sm90_built() { return false; }
Status sm90_supports(const FwdParams&) {
  return {StatusCode::kNotSupported, "backend sm90 is not built (FLASHATTN_ARCHS lacks 90a)"};
}
Status sm90_forward(const FwdParams& p, cudaStream_t) { return sm90_supports(p); }
// With 90a built, src/sm90/bwd/launcher.cu defines these.
Status sm90_supports(const BwdParams&) {
  return {StatusCode::kNotSupported, "backend sm90 is not built (FLASHATTN_ARCHS lacks 90a)"};
}
Status sm90_backward(const BwdParams& p, cudaStream_t) { return sm90_supports(p); }
#endif

#if !FLASHATTN_HAS_SM80
bool sm80_built() { return false; }
Status sm80_supports(const FwdParams&) {
  return {StatusCode::kNotSupported, "backend sm80 is not built (FLASHATTN_ARCHS lacks 80)"};
}
Status sm80_forward(const FwdParams& p, cudaStream_t) { return sm80_supports(p); }
// With 80 built, src/sm80/bwd/launcher.cu defines these.
Status sm80_supports(const BwdParams&) {
  return {StatusCode::kNotSupported, "backend sm80 is not built (FLASHATTN_ARCHS lacks 80)"};
}
Status sm80_backward(const BwdParams& p, cudaStream_t) { return sm80_supports(p); }
Status sm80_backward_for_smem(const BwdParams& p, int, cudaStream_t) { return sm80_supports(p); }
#endif

}  // namespace flashattn::detail
