// Public C++ API of libflashattn. Framework-free: plain pointers, shapes and strides.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace flashattn {

enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

// A 4-D view (batch, seqlen, heads, headdim) with strides in elements.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kFloat16;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
};

// Builds a contiguous (B, S, H, D) view.
TensorRef make_contiguous(void* data, DType dtype, int64_t b, int64_t s, int64_t h, int64_t d);

enum class Backend : int { kAuto = 0, kSm90 = 1, kSm80 = 2, kReference = 3 };

const char* backend_name(Backend b);

struct ForwardArgs {
  TensorRef q;    // (B, Sq, Hq, D)
  TensorRef k;    // (B, Sk, Hkv, D)
  TensorRef v;    // (B, Sk, Hkv, Dv), Dv == D
  TensorRef out;  // (B, Sq, Hq, D), same dtype as q
  float* lse = nullptr;        // optional (B, Hq, Sq) fp32 contiguous, natural log
  float softmax_scale = 0.0f;  // 0 means 1/sqrt(D)
  bool causal = false;         // bottom-right aligned when Sq != Sk
  Backend backend = Backend::kAuto;
};

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotSupported = 2,
  kNoDevice = 3,
  kCudaError = 4,
  kInternal = 5,
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Validates, dispatches and launches on `stream`. Nothing is launched on a bad call.
// A call with any size 0 succeeds and launches nothing.
Status forward(const ForwardArgs& args, cudaStream_t stream = nullptr);

// The backend `forward` would run for these arguments on the current device (after validation).
Status resolve_backend(const ForwardArgs& args, Backend* chosen);

// Validation only (no device queries); exposed for tests and bindings.
Status validate(const ForwardArgs& args);

const char* version();

}  // namespace flashattn
