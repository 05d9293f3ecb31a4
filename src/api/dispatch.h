// The dispatch rule both directions share: the device's capability and each family's
// <family>_supports(p) (overloaded on FwdParams / BwdParams), and the one device query of a call.
#pragma once

#include <string>

#include "api/backends.h"
#include "common/device_info.h"

namespace flashattn::detail {

template <class Params>
Status choose_backend_for(const Params& p, Backend requested, int major, int minor, Backend* chosen) {
  if (major < 8)
    return {StatusCode::kNoDevice, "device has compute capability " + std::to_string(major) + "." +
                                       std::to_string(minor) + "; flashattn needs 8.0 or newer"};
  const bool hopper = major == 9 && minor == 0;
  Status s;
  switch (requested) {
    case Backend::kReference:
      *chosen = Backend::kReference;
      return Status::Ok();
    case Backend::kSm90:
      if (!sm90_built()) return sm90_supports(p);
      if (!hopper)
        return {StatusCode::kNotSupported,
                "backend sm90 needs compute capability 9.0 (device is " + std::to_string(major) +
                    "." + std::to_string(minor) + ")"};
      s = sm90_supports(p);
      if (s.ok()) *chosen = Backend::kSm90;
      return s;
    case Backend::kSm80:
      s = sm80_supports(p);
      if (s.ok()) *chosen = Backend::kSm80;
      return s;
    case Backend::kAuto:
      // Fastest family that serves the call; the naive reference only as the last resort, so
      // every valid call still gets a correct answer.
      if (hopper && sm90_built() && sm90_supports(p).ok()) {
        *chosen = Backend::kSm90;
      } else if (sm80_built() && sm80_supports(p).ok()) {
        *chosen = Backend::kSm80;
      } else {
        *chosen = Backend::kReference;
      }
      return Status::Ok();
  }
  return {StatusCode::kInvalidArgument, "backend: unknown value"};
}

// choose_backend on the current device (its info is cached per device: common/device_info.h).
template <class Params>
Status pick_backend(const Params& p, Backend requested, Backend* chosen) {
  DeviceInfo dev;
  Status s = current_device_info(&dev);
  if (!s.ok()) return s;
  return choose_backend(p, requested, dev.major, dev.minor, chosen);
}

}  // namespace flashattn::detail
