// sm80 backward tuning candidates (tools/tune/bwd_candidates.cu): configurations of
// Sm80BwdOptions (src/sm80/bwd/config.h) compiled into flashattn-sm80-tune only, so --bwd can
// check and time each against the shipped one on this device.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>

#include "api/backends.h"
#include "sm80/bwd/config.h"

namespace flashattn::sm80 {

struct BwdCandidate {
  using Run = Status (*)(const detail::BwdParams&, cudaStream_t);
  Sm80BwdOptions options;
  bool bf16 = false;
  int smem_bytes = 0;  // dynamic shared memory of the main kernel
  Run run = nullptr;   // the whole backward (pre, main, post), causal or not by p.causal
  // e.g. "bwd_d128_m64n128w8_sdp4_kv2_dq2" plus "_sl2" (S^T slices), "_dqp2" (dQ passes),
  // "_nodb" (one Q / dO stage), "_fl" (full_block_loads), "_mb" (mask_branch).
  std::string name() const;
};

// Every candidate, both dtypes of each configuration; the shipped configurations are among them.
std::span<const BwdCandidate> bwd_candidates();

}  // namespace flashattn::sm80
