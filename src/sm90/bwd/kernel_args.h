// Plain kernel arguments of the sm90 backward (the tensor maps of Q, dO, K, V go separately as
// __grid_constant__ parameters).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/bwd_features.h"
#include "common/fast_div.h"
#include "common/mask.h"
#include "sm90/tile_order.h"

namespace flashattn::sm90 {

struct Sm90BwdArgs {
  // Written by the preprocess: (B, Hq, sq_pad) lse in log2 units (+inf where no key is seen or
  // past sq, so P is 0 there) and rowsum(dO * O).
  const float* lse_log2 = nullptr;
  const float* dsum = nullptr;
  float* dq_accum = nullptr;  // (B, Hq, num_m_blocks, kBlockM * D) fp32, the config's order
  int* dq_turn = nullptr;     // (B, Hq, num_m_blocks): deterministic mode's next key block, else null
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t dk_sb = 0, dk_ss = 0, dk_sh = 0;
  int64_t dv_sb = 0, dv_ss = 0, dv_sh = 0;
  int sq = 0, sk = 0, hq = 0, hkv = 0, h_ratio = 1;
  int d = 0, d_v = 0;  // dK's and dV's columns (<= the kernel's head dim; no others are written)
  int sq_pad = 0, num_m_blocks = 0;
  float scale = 0.f;       // dK = scale * dS^T Q
  float scale_log2 = 0.f;  // P = exp2(scale_log2 * S - lse_log2); softcap: exp2(scale_log2 * t - lse_log2)
};

// The feature kernels' arguments (MaskKind::kLocal configs, issue 17): a base block (the plain
// arguments, or the varlen ones: bwd/varlen.h) plus common/bwd_features.h's fields.
using detail::WithBwdFeatures;
using Sm90BwdFeatureArgs = WithBwdFeatures<Sm90BwdArgs>;

// The causal kernels' arguments (BwdConfig::kGroupedOrder): the grid may be one dimension in `order` (grouped = 1), the
// longest key blocks of an L2-sized group of (batch, kv head) pairs first: CTAs cost from one to
// all query blocks, and in the (key block, kv head, batch) order the longest CTAs of the last
// pairs started late and ran alone at the end of the grid. Deterministic mode keeps the
// three-dimensional grid (its dQ order waits on key blocks launched before, bwd/kernel.h).
struct Sm90BwdCausalArgs : Sm90BwdArgs {
  TileOrder order;  // num_m_blocks = key blocks (rank 0 = key block 0), pairs = batch x kv heads
  int grouped = 0;
};

template <class Cfg>
using BwdArgsOf =
    std::conditional_t<Cfg::kMaskKind == MaskKind::kLocal, Sm90BwdFeatureArgs,
                       std::conditional_t<Cfg::kGroupedOrder, Sm90BwdCausalArgs, Sm90BwdArgs>>;

}  // namespace flashattn::sm90
