// sm90 family entry points (src/api/backends.h): capability checks and dispatch by head dim
// and dtype. Kernels live in instantiations/.
#include <cuda_runtime.h>

#include <string>

#include "api/backends.h"
#include "sm90/fwd/launch.h"
#include "sm90/head_dim.h"

namespace flashattn::detail {

bool sm90_built() { return true; }

// The device's capability (9.0) is choose_backend's check, and p.scale > 0 validation's
// (src/api/backends.h): only what the sm90 kernels add is checked here.
Status sm90_supports(const FwdParams& p) {
  // Windows, softcap and ALiBi run on the feature kernels, dense and varlen.
  if (sm90::fwd_kernel_head_dim(p.d, p.d_v) == 0)
    return {StatusCode::kNotSupported, "backend sm90: head dims " + std::to_string(p.d) + "/" + std::to_string(p.d_v) +
                                           " not supported (up to 256)"};
  // TMA: non-innermost strides must be nonzero multiples of 16 bytes (validation guarantees
  // multiples of 8 elements; a zero/broadcast stride is the remaining case).
  // (A varlen call's tensors are one packed batch: their batch strides are never used.)
  const int64_t strides[] = {p.q.ss, p.q.sh, p.varlen() ? 8 : p.q.sb, p.k.ss, p.k.sh, p.varlen() ? 8 : p.k.sb,
                             p.v.ss, p.v.sh, p.varlen() ? 8 : p.v.sb};
  for (int64_t s : strides)
    if (s <= 0 || s % 8 != 0)
      return {StatusCode::kNotSupported, "backend sm90: q/k/v strides must be positive multiples of 8 elements (TMA)"};
  if (sm90::tensor_map_encoder() == nullptr)
    return {StatusCode::kNotSupported, "backend sm90: driver has no cuTensorMapEncodeTiled"};
  return Status::Ok();
}

namespace {
// The keys one query row may see under the call's window (its bounded form), at most Sk.
int64_t window_width(const FwdParams& p) {
  const Mask<MaskKind::kLocal> w = make_local_mask(p.sq, p.sk, p.window_left, p.window_right, p.causal);
  const int64_t width = static_cast<int64_t>(w.left) + w.right + 1;
  return width < p.sk ? width : p.sk;
}
}  // namespace

// Precondition: choose_backend picked sm90 for p (device 9.0, sm90_supports ok).
Status sm90_forward(const FwdParams& p, cudaStream_t stream) {
  const bool bf16 = p.dtype == ElemType::kBFloat16;
  // A head dim between two instantiated ones runs on the larger kernel: TMA fills the columns
  // past d (q, k) and dv (v) with zeros, so S and O are exact, and O's columns past dv are
  // never written (the TMA store clips them; the direct store skips them).
  if (p.has_features()) {
    const int kd = sm90::fwd_kernel_head_dim(p.d, p.d_v);
    // A window alone on a dense call: the causal kernels' tiles with the window mask, where
    // they are faster than the feature kernel's (tile_table.h window_twin_serves).
    if (p.has_window() && p.softcap <= 0.f && p.alibi_slopes == nullptr && !p.varlen() &&
        sm90::window_twin_serves(kd, p.sq, window_width(p))) {
      switch (kd) {
        case 64: return bf16 ? sm90::run_fwd_window<64, true>(p, stream) : sm90::run_fwd_window<64, false>(p, stream);
        case 128: return bf16 ? sm90::run_fwd_window<128, true>(p, stream) : sm90::run_fwd_window<128, false>(p, stream);
        default: break;  // the feature kernel below
      }
    }
    // Softcap / ALiBi without a window on a dense call: the dense kernels with the switches.
    if (!p.has_window() && !p.varlen()) {
      switch (kd) {
        case 64: return bf16 ? sm90::run_fwd_score_mod<64, true>(p, stream) : sm90::run_fwd_score_mod<64, false>(p, stream);
        case 128: return bf16 ? sm90::run_fwd_score_mod<128, true>(p, stream) : sm90::run_fwd_score_mod<128, false>(p, stream);
        default: break;  // the feature kernel below
      }
    }
    switch (kd) {
      case 64: return bf16 ? sm90::run_fwd_feature<64, true>(p, stream) : sm90::run_fwd_feature<64, false>(p, stream);
      case 96: return bf16 ? sm90::run_fwd_feature<96, true>(p, stream) : sm90::run_fwd_feature<96, false>(p, stream);
      case 128: return bf16 ? sm90::run_fwd_feature<128, true>(p, stream) : sm90::run_fwd_feature<128, false>(p, stream);
      case 192: return bf16 ? sm90::run_fwd_feature<192, true>(p, stream) : sm90::run_fwd_feature<192, false>(p, stream);
      default: return bf16 ? sm90::run_fwd_feature<256, true>(p, stream) : sm90::run_fwd_feature<256, false>(p, stream);
    }
  }
  if (p.varlen()) {
    switch (sm90::fwd_kernel_head_dim(p.d, p.d_v)) {
      case 64: return bf16 ? sm90::run_fwd_varlen<64, true>(p, stream) : sm90::run_fwd_varlen<64, false>(p, stream);
      case 96: return bf16 ? sm90::run_fwd_varlen<96, true>(p, stream) : sm90::run_fwd_varlen<96, false>(p, stream);
      case 128: return bf16 ? sm90::run_fwd_varlen<128, true>(p, stream) : sm90::run_fwd_varlen<128, false>(p, stream);
      case 192: return bf16 ? sm90::run_fwd_varlen<192, true>(p, stream) : sm90::run_fwd_varlen<192, false>(p, stream);
      default: return bf16 ? sm90::run_fwd_varlen<256, true>(p, stream) : sm90::run_fwd_varlen<256, false>(p, stream);
    }
  }
  if (sm90::fwd_uses_pair_192_128(p.d, p.d_v))
    return bf16 ? sm90::run_fwd_192_128<true>(p, stream) : sm90::run_fwd_192_128<false>(p, stream);
  switch (sm90::fwd_kernel_head_dim(p.d, p.d_v)) {
    case 64: return bf16 ? sm90::run_fwd<64, true>(p, stream) : sm90::run_fwd<64, false>(p, stream);
    case 96: return bf16 ? sm90::run_fwd<96, true>(p, stream) : sm90::run_fwd<96, false>(p, stream);
    case 128: return bf16 ? sm90::run_fwd<128, true>(p, stream) : sm90::run_fwd<128, false>(p, stream);
    case 192: return bf16 ? sm90::run_fwd<192, true>(p, stream) : sm90::run_fwd<192, false>(p, stream);
    default: return bf16 ? sm90::run_fwd<256, true>(p, stream) : sm90::run_fwd<256, false>(p, stream);
  }
}

}  // namespace flashattn::detail
