// Public backward entry points: validate, pick a backend for the current device, launch.
#include <string>

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/validate.h"
#include "api/zero_fill.h"
#include "common/device_info.h"

namespace flashattn {

using detail::BwdParams;

Status validate(const BackwardArgs& args) {
  return detail::validate_and_convert(args, nullptr, nullptr);
}

namespace detail {

// Defined here rather than in src/sm80 so the answer is the same whether or not the sm80
// family is built; the family takes these over when it gains a backward kernel.
Status sm80_supports(const BwdParams&) {
  return {StatusCode::kNotSupported, "backend sm80: no backward kernel yet (see the sm80 backward issue)"};
}
Status sm80_backward(const BwdParams& p, cudaStream_t) { return sm80_supports(p); }

Status choose_backend(const BwdParams& p, Backend requested, int major, int minor,
                      Backend* chosen) {
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
      // As the forward: the fastest family that serves the call, the naive reference (slow,
      // always correct) otherwise, so every valid call gets gradients.
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

Status device_capability(int* major, int* minor) {
  DeviceInfo dev;
  Status s = current_device_info(&dev);
  if (!s.ok()) return s;
  *major = dev.major;
  *minor = dev.minor;
  return Status::Ok();
}

bool has_elements(const TensorRef& t) {
  return t.shape[0] > 0 && t.shape[1] > 0 && t.shape[2] > 0 && t.shape[3] > 0;
}

// An empty call (some size 0) whose gradients still have elements: with Sq == 0 no query
// reaches dk/dv, with Sk == 0 no key reaches dq (out is 0 there), so they are 0. A call with
// nothing to write needs no device, as an empty forward.
Status zero_fill_gradients(const BackwardArgs& a, cudaStream_t stream) {
  const TensorRef* grads[] = {&a.dq, &a.dk, &a.dv};
  bool any = false;
  for (const TensorRef* g : grads) any = any || has_elements(*g);
  if (!any) return Status::Ok();
  int major = 0, minor = 0;
  Backend unused;
  Status s = device_capability(&major, &minor);
  // The reference request carries only the device rule (the fill kernel is built for 8.0+).
  if (s.ok()) s = choose_backend(BwdParams{}, Backend::kReference, major, minor, &unused);
  for (const TensorRef* g : grads)
    if (s.ok() && has_elements(*g)) s = zero_fill_4d(g->data, g->shape, g->stride, stream);
  return s;
}

}  // namespace
}  // namespace detail

Status resolve_backend(const BackwardArgs& args, Backend* chosen) {
  BwdParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok()) return s;
  if (chosen == nullptr) return {StatusCode::kInvalidArgument, "chosen: null pointer"};
  int major = 0, minor = 0;
  s = detail::device_capability(&major, &minor);
  if (!s.ok()) return s;
  // An empty call runs no family (at most the library's zero fill): report the reference
  // rather than asking the families about sizes of 0.
  return detail::choose_backend(p, empty ? Backend::kReference : args.backend, major, minor,
                                chosen);
}

Status backward(const BackwardArgs& args, cudaStream_t stream) {
  BwdParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok()) return s;
  if (empty) return detail::zero_fill_gradients(args, stream);
  int major = 0, minor = 0;
  Backend chosen = Backend::kReference;
  s = detail::device_capability(&major, &minor);
  if (s.ok()) s = detail::choose_backend(p, args.backend, major, minor, &chosen);
  if (!s.ok()) return s;
  // choose_backend has checked the device and the family's supports(): the families trust it.
  switch (chosen) {
    case Backend::kSm90: return detail::sm90_backward(p, stream);
    case Backend::kSm80: return detail::sm80_backward(p, stream);
    default: return detail::reference_backward(p, stream);
  }
}

}  // namespace flashattn
