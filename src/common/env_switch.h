// Run-time switches for A/B runs in one process, read on the host per call (a getenv per
// launch), and the host side of the switches the forward kernels of both families share.
#pragma once

#include <cstdlib>
#include <cstring>

#include "common/params.h"

namespace flashattn {

// On unless the environment sets `name` to "0".
inline bool env_switch_on(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || std::strcmp(e, "0") != 0;
}

// The forward feature kernels' softcap argument: scale / softcap (0: no softcap), negative when
// the softmax may take softcap's bound as every row's max (AttnParams::softcap_bounds_max; the
// sign carries that switch so the kernels spend no register on it).
// FLASHATTN_SOFTCAP_BOUNDED_MAX=0 keeps the tracked max (A/B runs).
inline float softcap_scale_arg(const detail::AttnParams& p) {
  const float s = p.softcap_scale();
  return p.softcap_bounds_max() && env_switch_on("FLASHATTN_SOFTCAP_BOUNDED_MAX") ? -s : s;
}

}  // namespace flashattn
