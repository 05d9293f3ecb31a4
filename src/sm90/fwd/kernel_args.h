// Device-side arguments of the sm90 forward kernel (the tensor maps travel separately as
// __grid_constant__ parameters).
#pragma once

#include <cstdint>
#include <type_traits>

#include "sm90/barriers.h"
#include "sm90/fwd/ablation.h"
#include "sm90/fwd/stream_k.h"
#include "sm90/pipeline.h"
#include "sm90/scheduler.h"
#include "sm90/tile_order.h"


namespace flashattn::sm90 {

struct Sm90FwdArgs {
  void* o;     // (B, Sq, Hq, D), q's dtype
  float* lse;  // (B, Hq, Sq) fp32 or null
  int64_t o_sb, o_ss, o_sh;
  int d_v;     // O's columns (<= the kernel's head dim; columns past it are never written)
  int sq, sk, hq, b;
  FastDiv div_h_ratio;  // x / h_ratio
  TileOrder order;
  float scale_log2;
  int* tile_counter;  // dynamic persistent scheduling (2 ints, zero between launches), or null
  bool o_tma;         // kTmaStoreEpilogue configs: O's tensor map is valid (else direct stores)
  // Stream-K tail (stream_k.h): the plan, one arrival counter per (split tile, consumer warp)
  // (zero between launches: the merging warp resets it) and the partial-result slots.
  StreamKPlan plan;
  int* sk_counters;
  float* sk_partials;
  // Varlen configs (Cfg::kVarlen): B + 1 offsets into the packed rows; sq / sk above are the
  // max lengths, b the number of sequences; lse is (Hq, total_q).
  const int* cu_q;
  const int* cu_k;
  int total_q, total_k;
  // kLocal configs: the window in Mask<kLocal>'s bounded form (common/mask.h make_local_mask).
  int window_left, window_right;
  // kSoftcap configs: scale / softcap, or 0 (off); scale_log2 is then softcap * log2(e).
  // Negative (bf16 only): the same magnitude, and the softmax takes softcap as every row's max
  // (Consumer::bounded_max).
  float softcap_scale;
  // kSoftcap configs (the feature kernels) also take ALiBi: slopes (b * alibi_bstride + h), or null.
  const float* alibi;
  int64_t alibi_bstride;
#if FLASHATTN_SM90_TRACE
  unsigned long long* trace;  // [gridDim.x][kTraceEvents][4]
#endif
};
constexpr int kTraceEvents = 64;

// The CTA's mbarriers (static smem, 8-byte aligned).
template <int kStages, class SlotT = WorkSlot>
struct PipelineBarriers {
  using Slot = SlotT;
  MbarRing<2> q;        // per Q slot (Cfg::kQStages used): empty = the slot's last QK^T retired
  MbarRing<kStages> k;  // K and V of a stage have their own barriers: QK^T(j) starts on K(j) alone
  MbarRing<kStages> v;
  MbarRing<2> sched;        // work ring: scheduler thread -> loader and consumers
  uint64_t sched_taken[2];  // the loader has taken the slot (paces the claims)
  Slot work[2];
};
template <class Cfg>
using FwdBarriers = PipelineBarriers<Cfg::kStages, std::conditional_t<Cfg::kVarlen, VarlenWorkSlot, WorkSlot>>;

}  // namespace flashattn::sm90
