// sm90 backward: dispatch over the instantiated head dims (filled in with the kernel).
#include "api/backends.h"

namespace flashattn::detail {

Status sm90_supports(const BwdParams&) {
  return {StatusCode::kNotSupported, "backend sm90: no backward kernel yet"};
}

Status sm90_backward(const BwdParams& p, cudaStream_t) { return sm90_supports(p); }

}  // namespace flashattn::detail
