// Public entry points: validate, pick a backend for the current device, launch.
#include <string>

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/dispatch.h"
#include "api/validate.h"
#include "api/varlen_check.h"

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
  return choose_backend_for(p, requested, major, minor, chosen);
}

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
  if (p.varlen()) {
    s = detail::debug_check_varlen(args.cu_seqlens_q, args.cu_seqlens_k, args.num_seqs, args.max_seqlen_q,
                                   args.max_seqlen_k, args.q.shape[1], args.k.shape[1], stream);
    if (!s.ok()) return s;
  }
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
