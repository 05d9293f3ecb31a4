// sm90 backward: what the family serves, and dispatch over the instantiated head dims.
#include <cstdint>
#include <string>

#include "api/backends.h"
#include "sm90/bwd/launch.h"
#include "sm90/bwd/launch_varlen.h"
#include "sm90/head_dim.h"
#include "sm90/tma_host.h"

namespace flashattn::detail {

// What the varlen kernels (bwd/launch_varlen.h) add: 32-bit indices into the padded scratch.
Status sm90_supports_varlen(const BwdParams& p) {
  if (!varlen_bwd_scratch_fits(p.total_q, p.b, p.hq, p.sq))
    return {StatusCode::kNotSupported, "backend sm90: varlen backward scratch indices exceed 32 bits (total_q " +
                                           std::to_string(p.total_q) + ", num_seqs " + std::to_string(p.b) + ")"};
  return Status::Ok();
}

Status sm90_supports(const BwdParams& p) {
  // Window, softcap and ALiBi run on the feature kernels (launch.h run_bwd_feature); varlen calls
  // on the varlen kernels (launch_varlen.h run_bwd_varlen), with those on run_bwd_varlen_feature.
  if (sm90::bwd_kernel_head_dim(p.d, p.d_v) == 0)
    return {StatusCode::kNotSupported, "backend sm90: no backward kernel for head dims " + std::to_string(p.d) + "/" +
                                           std::to_string(p.d_v) + " (up to 256)"};
  if (p.varlen()) {
    if (Status s = sm90_supports_varlen(p); !s.ok()) return s;
  }
  // TMA: non-innermost strides must be nonzero multiples of 16 bytes. (A varlen call's tensors are
  // one packed batch: their batch strides are never used.)
  const int64_t sb_q = p.varlen() ? 8 : p.q.sb, sb_k = p.varlen() ? 8 : p.k.sb, sb_v = p.varlen() ? 8 : p.v.sb,
                sb_do = p.varlen() ? 8 : p.dout.sb;
  const int64_t strides[] = {p.q.ss, p.q.sh, sb_q, p.k.ss, p.k.sh, sb_k,
                             p.v.ss, p.v.sh, sb_v, p.dout.ss, p.dout.sh, sb_do};
  for (int64_t s : strides)
    if (s <= 0 || s % 8 != 0)
      return {StatusCode::kNotSupported, "backend sm90: q/k/v/dout strides must be positive multiples of 8 elements (TMA)"};
  if (p.hkv > 65535 || p.b > 65535)
    return {StatusCode::kNotSupported, p.varlen() ? "backend sm90: backward grid takes at most 65535 kv heads and sequences (num_seqs)"
                                                  : "backend sm90: backward grid takes at most 65535 kv heads and batches"};
  if (sm90::tensor_map_encoder() == nullptr)
    return {StatusCode::kNotSupported, "backend sm90: driver has no cuTensorMapEncodeTiled"};
  return Status::Ok();
}

// Precondition: choose_backend picked sm90 for p (device 9.0, sm90_supports ok).
Status sm90_backward(const BwdParams& p, cudaStream_t stream) {
  const bool bf16 = p.dtype == ElemType::kBFloat16;
  if (p.varlen() && p.has_features()) {
    switch (sm90::bwd_kernel_head_dim(p.d, p.d_v)) {
      case 64: return bf16 ? sm90::run_bwd_varlen_feature<64, true>(p, stream) : sm90::run_bwd_varlen_feature<64, false>(p, stream);
      case 128: return bf16 ? sm90::run_bwd_varlen_feature<128, true>(p, stream) : sm90::run_bwd_varlen_feature<128, false>(p, stream);
      default: return bf16 ? sm90::run_bwd_varlen_feature<256, true>(p, stream) : sm90::run_bwd_varlen_feature<256, false>(p, stream);
    }
  }
  if (p.varlen()) {
    switch (sm90::bwd_kernel_head_dim(p.d, p.d_v)) {
      case 64: return bf16 ? sm90::run_bwd_varlen<64, true>(p, stream) : sm90::run_bwd_varlen<64, false>(p, stream);
      case 128: return bf16 ? sm90::run_bwd_varlen<128, true>(p, stream) : sm90::run_bwd_varlen<128, false>(p, stream);
      default: return bf16 ? sm90::run_bwd_varlen<256, true>(p, stream) : sm90::run_bwd_varlen<256, false>(p, stream);
    }
  }
  if (p.has_features()) {
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
