// sm90 family entry points (src/api/backends.h): capability checks and dispatch by head dim
// and dtype. Kernels live in instantiations/.
#include <cuda_runtime.h>

#include <string>

#include "api/backends.h"
#include "sm90/launch_template.h"

namespace flashattn::detail {

bool sm90_built() { return true; }

Status sm90_supports(const FwdParams& p) {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return {StatusCode::kNoDevice, "backend sm90: no CUDA device"};
  if (major != 9 || minor != 0)
    return {StatusCode::kNotSupported, "backend sm90: needs compute capability 9.0 (sm_90a), device is " +
                                           std::to_string(major) + "." + std::to_string(minor)};
  if (p.d != 64 && p.d != 128 && p.d != 256)
    return {StatusCode::kNotSupported, "backend sm90: head dim " + std::to_string(p.d) + " not supported (64, 128, 256)"};
  if (!(p.scale > 0.f))
    return {StatusCode::kNotSupported, "backend sm90: softmax scale must be positive (running max is kept in the scaled domain)"};
  // TMA: non-innermost strides must be nonzero multiples of 16 bytes (validation guarantees
  // multiples of 8 elements; a zero/broadcast stride is the remaining case).
  const int64_t strides[] = {p.q.ss, p.q.sh, p.q.sb, p.k.ss, p.k.sh, p.k.sb, p.v.ss, p.v.sh, p.v.sb};
  for (int64_t s : strides)
    if (s <= 0 || s % 8 != 0)
      return {StatusCode::kNotSupported, "backend sm90: q/k/v strides must be positive multiples of 8 elements (TMA)"};
  if (sm90::tensor_map_encoder() == nullptr)
    return {StatusCode::kNotSupported, "backend sm90: driver has no cuTensorMapEncodeTiled"};
  return Status::Ok();
}

Status sm90_forward(const FwdParams& p, cudaStream_t stream) {
  if (Status st = sm90_supports(p); !st.ok()) return st;
  const bool bf16 = p.dtype == ElemType::kBFloat16;
  switch (p.d) {
    case 64: return bf16 ? sm90::run_fwd<64, true>(p, stream) : sm90::run_fwd<64, false>(p, stream);
    case 128: return bf16 ? sm90::run_fwd<128, true>(p, stream) : sm90::run_fwd<128, false>(p, stream);
    default: return bf16 ? sm90::run_fwd<256, true>(p, stream) : sm90::run_fwd<256, false>(p, stream);
  }
}

}  // namespace flashattn::detail
