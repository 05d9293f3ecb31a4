// Named CTA barrier ids of the sm90 kernels (bar.sync/bar.arrive take immediates, so the ids are
// compile-time constants; 0 is __syncthreads). The forward's and, with the backward, the
// backward's ids live side by side here so no two roles of one kernel share an id by accident.
#pragma once

namespace flashattn::sm90 {

enum FwdNamedBarrier : int {
  kBarPingPongWg0 = 1,  // consumer warpgroup 0 may issue its GEMMs
  kBarPingPongWg1 = 2,  // consumer warpgroup 1 may issue its GEMMs
  kBarPingPongWg2 = 3,  // consumer warpgroup 2 may issue its GEMMs (3-group configs)
  kBarEpilogueWg0 = 4,  // TMA-store epilogue: consumer warpgroup g's 128 threads use id 4 + g
  kFwdNamedBarrierEnd = 7,
};
static_assert(kFwdNamedBarrierEnd <= 16, "a CTA has 16 named barriers");

// The backward kernel's (its own CTAs, so the ids restart).
enum BwdNamedBarrier : int {
  kBarBwdDsReady = 1,  // both MMA warpgroups stored their dS^T
  kBarBwdVarlenZero = 2,  // varlen: both MMA warpgroups zeroed the tile rows outside the sequence
  kBwdNamedBarrierEnd = 3,
};

}  // namespace flashattn::sm90
