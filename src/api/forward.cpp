// Public entry points: validate, pick a backend for the current device, launch.
#include <string>

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/validate.h"
#include "common/device_info.h"

namespace flashattn {

using detail::FwdParams;

TensorRef make_contiguous(void* data, DType dtype, int64_t b, int64_t s, int64_t h, int64_t d) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.shape[0] = b; t.shape[1] = s; t.shape[2] = h; t.shape[3] = d;
  t.stride[3] = 1; t.stride[2] = d; t.stride[1] = h * d; t.stride[0] = s * h * d;
  return t;
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kSm90: return "sm90";
    case Backend::kSm80: return "sm80";
    case Backend::kReference: return "reference";
  }
  return "unknown";
}

const char* version() { return FLASHATTN_VERSION; }

Status validate(const ForwardArgs& args) {
  return detail::validate_and_convert(args, nullptr, nullptr);
}

namespace detail {

Status check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(e)};
  return Status::Ok();
}

Status choose_backend(const FwdParams& p, Backend requested, int major, int minor,
                      Backend* chosen) {
  Status s;
  if (major < 8)
    return {StatusCode::kNoDevice, "device has compute capability " + std::to_string(major) + "." +
                                       std::to_string(minor) + "; flashattn needs 8.0 or newer"};
  const bool hopper = major == 9 && minor == 0;
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
      // Fastest family that serves the shape; the naive reference only as the last resort,
      // so every valid call still gets a correct answer.
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

namespace {

// The one device query of a call (cached per device after the first: common/device_info.h).
Status pick_backend(const FwdParams& p, Backend requested, Backend* chosen) {
  DeviceInfo dev;
  Status s = current_device_info(&dev);
  if (!s.ok()) return s;
  return choose_backend(p, requested, dev.major, dev.minor, chosen);
}

}  // namespace
}  // namespace detail

Status resolve_backend(const ForwardArgs& args, Backend* chosen) {
  FwdParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok()) return s;
  if (chosen == nullptr) return {StatusCode::kInvalidArgument, "chosen: null pointer"};
  return detail::pick_backend(p, args.backend, chosen);
}

Status forward(const ForwardArgs& args, cudaStream_t stream) {
  FwdParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok() || empty) return s;
  Backend chosen = Backend::kReference;
  s = detail::pick_backend(p, args.backend, &chosen);
  if (!s.ok()) return s;
  // choose_backend has checked the device and the family's supports(): the families trust it.
  switch (chosen) {
    case Backend::kSm90: return detail::sm90_forward(p, stream);
    case Backend::kSm80: return detail::sm80_forward(p, stream);
    default: return detail::reference_forward(p, stream);
  }
}

}  // namespace flashattn
