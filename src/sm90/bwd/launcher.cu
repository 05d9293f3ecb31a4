// sm90 backward: what the family serves, and dispatch over the instantiated head dims.
#include <string>

#include "api/backends.h"
#include "sm90/bwd/launch.h"
#include "sm90/head_dim.h"
#include "sm90/tma_host.h"

namespace flashattn::detail {

Status sm90_supports(const BwdParams& p) {
  // Window, softcap and ALiBi run on the feature kernels (launch.h run_bwd_feature). BwdParams carries
  // no varlen batch today; if it ever does, refuse it here until the kernels learn it.
  if (sm90::bwd_kernel_head_dim(p.d, p.d_v) == 0)
    return {StatusCode::kNotSupported, "backend sm90: no backward kernel for head dims " + std::to_string(p.d) + "/" +
                                           std::to_string(p.d_v) + " (up to 256)"};
  // TMA: non-innermost strides must be nonzero multiples of 16 bytes.
  const int64_t strides[] = {p.q.ss, p.q.sh, p.q.sb, p.k.ss, p.k.sh, p.k.sb,
                             p.v.ss, p.v.sh, p.v.sb, p.dout.ss, p.dout.sh, p.dout.sb};
  for (int64_t s : strides)
    if (s <= 0 || s % 8 != 0)
      return {StatusCode::kNotSupported, "backend sm90: q/k/v/dout strides must be positive multiples of 8 elements (TMA)"};
  if (p.hkv > 65535 || p.b > 65535)
    return {StatusCode::kNotSupported, "backend sm90: backward grid takes at most 65535 kv heads and batches"};
  if (sm90::tensor_map_encoder() == nullptr)
    return {StatusCode::kNotSupported, "backend sm90: driver has no cuTensorMapEncodeTiled"};
  return Status::Ok();
}

// Precondition: choose_backend picked sm90 for p (device 9.0, sm90_supports ok).
Status sm90_backward(const BwdParams& p, cudaStream_t stream) {
  const bool bf16 = p.dtype == ElemType::kBFloat16;
  if (p.has_window() || p.softcap > 0.f || p.alibi_slopes != nullptr) {
    switch (sm90::bwd_kernel_head_dim(p.d, p.d_v)) {
      case 64: return bf16 ? sm90::run_bwd_feature<64, true>(p, stream) : sm90::run_bwd_feature<64, false>(p, stream);
      case 128: return bf16 ? sm90::run_bwd_feature<128, true>(p, stream) : sm90::run_bwd_feature<128, false>(p, stream);
      default: return bf16 ? sm90::run_bwd_feature<256, true>(p, stream) : sm90::run_bwd_feature<256, false>(p, stream);
    }
  }
  // As the forward: a smaller head dim runs on the covering kernel with zero-filled columns.
  switch (sm90::bwd_kernel_head_dim(p.d, p.d_v)) {
    case 64: return bf16 ? sm90::run_bwd<64, true>(p, stream) : sm90::run_bwd<64, false>(p, stream);
    case 128: return bf16 ? sm90::run_bwd<128, true>(p, stream) : sm90::run_bwd<128, false>(p, stream);
    default: return bf16 ? sm90::run_bwd<256, true>(p, stream) : sm90::run_bwd<256, false>(p, stream);
  }
}

}  // namespace flashattn::detail
