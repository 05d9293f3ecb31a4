// Device-side arguments of the sm90 forward kernel (the tensor maps travel separately as
// __grid_constant__ parameters).
#pragma once

#include <cstdint>

#include "sm90/stream_k.h"
#include "sm90/tile_order.h"

// Trace builds (-DFLASHATTN_SM90_TRACE=1, never the shipped one): consumer warp 0 of each CTA
// stamps every piece it runs (code, start, mainloop end, epilogue end) into args.trace, which
// the launcher dumps to $FLASHATTN_SM90_TRACE_FILE.
#ifndef FLASHATTN_SM90_TRACE
#define FLASHATTN_SM90_TRACE 0
#endif

namespace flashattn::sm90 {

struct Sm90FwdArgs {
  void* o;     // (B, Sq, Hq, D), q's dtype
  float* lse;  // (B, Hq, Sq) fp32 or null
  int64_t o_sb, o_ss, o_sh;
  int sq, sk, hq, b;
  FastDiv div_h_ratio;  // x / h_ratio
  TileOrder order;
  float scale_log2;
  bool causal;
  int* tile_counter;  // dynamic persistent scheduling (2 ints, zero between launches), or null
  bool o_tma;         // kTmaStoreEpilogue configs: O's tensor map is valid (else direct stores)
  // Stream-K tail (stream_k.h): the plan, one arrival counter per (split tile, consumer warp)
  // (zero between launches: the merging warp resets it) and the partial-result slots.
  StreamKPlan plan;
  int* sk_counters;
  float* sk_partials;
#if FLASHATTN_SM90_TRACE
  unsigned long long* trace;  // [gridDim.x][kTraceEvents][4]
#endif
};
constexpr int kTraceEvents = 64;

// Barrier ids of the named CTA barriers (0 is __syncthreads).
enum NamedBarrier : int {
  kBarPingPongWg0 = 1,  // consumer warpgroup 0 may issue its GEMMs
  kBarPingPongWg1 = 2,  // consumer warpgroup 1 may issue its GEMMs
  kBarPingPongWg2 = 3,  // consumer warpgroup 2 may issue its GEMMs (3-group configs)
  kBarEpilogueWg0 = 4,  // TMA-store epilogue: consumer warpgroup g's 128 threads use id 4 + g
};

// One published piece of work: the scheduler thread writes it, the loader and the consumers read
// it (scheduler.h). code: the piece's index in the plan (>= StreamKPlan's code_end(): no more).
struct WorkSlot {
  int code, m_block, h, b, n_lo, n_hi;
};

// The CTA's mbarriers (static smem, 8-byte aligned).
template <int kStages>
struct PipelineBarriers {
  uint64_t q_full[2], q_empty[2];  // per Q slot (Cfg::kQStages used): empty = last QK^T retired
  uint64_t k_full[kStages], k_empty[kStages];
  uint64_t v_full[kStages], v_empty[kStages];
  uint64_t sched_full[2], sched_empty[2];  // work ring: scheduler thread -> loader and consumers
  uint64_t sched_taken[2];                 // the loader has taken the slot (paces the claims)
  WorkSlot work[2];
};

}  // namespace flashattn::sm90
