// Consumer warpgroup: S = Q K^T (wgmma SS), online softmax in registers, O += P V (wgmma RS,
// P straight from the S accumulators), then the epilogue. Each consumer group owns 64 rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "arch/convert.h"
#include "arch/mbarrier.h"
#include "arch/named_barrier.h"
#include "arch/regs.h"
#include "arch/wgmma.h"
#include "sm90/fwd/ablation.h"
#include "sm90/fwd/kernel_args.h"
#include "sm90/pipeline.h"
#include "sm90/fwd/softmax.h"

namespace flashattn::sm90 {

template <class Cfg>
struct Consumer {
  static constexpr int kS = Cfg::kSRegs;
  static constexpr int kO = Cfg::kORegs;
  static constexpr int kP = Cfg::kPSteps;
  using Softmax = OnlineSoftmax<kS, Cfg::kConditionalRescale, Cfg::kSoftcapPolyExp2Every>;

  FwdBarriers<Cfg>& bars;
  uint32_t smem;
  int wg;  // consumer warpgroup index (0 or 1)
  // Ring positions, carried across the tiles of a persistent CTA (same sequence as the producer).
  PipelineState<Cfg::kStages> kv;
  RingCount<Cfg::kQStages> q_ring;  // tiles with work seen so far

  float rS[kS];     // (64, kBlockN) scores, then probabilities
  float rO[kO];     // (64, kHeadDim) running output
  Softmax sm;       // row max / sum of the piece in hand
  uint32_t rP[kP][4];  // P as the RS A operand, one 64x16 fragment per k16 step
  float softcap_scale = 0.f;  // kSoftcap configs: scale / softcap, 0 = off (config.h); < 0: see bounded_max
  // Feature kernels: ALiBi's -slope in S's units (S * scale_log2 is the exp2 argument), 0 = off.
  float alibi_coef = 0.f;
  // kSoftcap bf16 configs: a negative softcap_scale (its magnitude the scale) says the softmax
  // runs with a fixed max (OnlineSoftmax::step_bounded; softcap bounds every score) and O is
  // never rescaled (AttnParams::softcap_bounds_max, launch.h). The sign carries the switch to spare a register.
  __device__ __forceinline__ bool bounded_max() const { return Cfg::kSoftcap && Cfg::kBf16 && softcap_scale < 0.f; }

  __device__ __forceinline__ uint32_t q_slot() const { return Cfg::kQStages == 1 ? 0u : (q_ring.count - 1) % Cfg::kQStages; }
  // K-major Q and K: the stride byte offset steps 8 rows (one swizzle atom); the leading byte
  // offset is unused by swizzled K-major layouts.
  __device__ __forceinline__ uint64_t desc_q() const {
    return arch::make_smem_desc<Cfg::kSwizzleBytes>(
        smem + Cfg::kSmemQ + q_slot() * Cfg::kQBytes + wg * 64 * Cfg::kSwizzleBytes, 16, Cfg::kAtomBytes);
  }
  __device__ __forceinline__ uint64_t desc_k(int stage) const {
    return arch::make_smem_desc<Cfg::kSwizzleBytes>(smem + Cfg::kSmemK + stage * Cfg::kKBytes, 16, Cfg::kAtomBytes);
  }
  // V is (keys, d) with d contiguous: MN-major B. LBO steps to the next box of columns.
  __device__ __forceinline__ uint64_t desc_v(int stage) const {
    return arch::make_smem_desc<Cfg::kSwizzleBytes>(smem + Cfg::kSmemV + stage * Cfg::kVBytes, Cfg::kKVBoxBytes,
                                                    Cfg::kAtomBytes);
  }

  // QK^T's k16 step kk in 16-byte descriptor units: +32 B inside a swizzled row; every
  // kStepsPerBox steps, the next box (of Q / of K).
  static constexpr uint32_t q_step(int kk) {
    return ((kk / Cfg::kStepsPerBox) * Cfg::kQBoxBytes + (kk % Cfg::kStepsPerBox) * 32) >> 4;
  }
  static constexpr uint32_t k_step(int kk) {
    return ((kk / Cfg::kStepsPerBox) * Cfg::kKVBoxBytes + (kk % Cfg::kStepsPerBox) * 32) >> 4;
  }
  // S = Q K^T from the descriptors dq, dk. kLowWordAdd: a step's offset moves only the start
  // address (bits 0-13; bits 14-15 are zero, so the sum cannot carry out of the low word) and
  // is added to the low word alone, one 32-bit add instead of a 64-bit one.
  template <bool kLowWordAdd = false>
  __device__ __forceinline__ void issue_qk_desc(uint64_t dq, uint64_t dk) {
    const uint32_t q_lo = static_cast<uint32_t>(dq), k_lo = static_cast<uint32_t>(dk);
    const uint64_t q_hi = dq & 0xffffffff00000000ull, k_hi = dk & 0xffffffff00000000ull;
    arch::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
      const uint64_t a = kLowWordAdd ? q_hi | (q_lo + q_step(kk)) : dq + q_step(kk);
      const uint64_t b = kLowWordAdd ? k_hi | (k_lo + k_step(kk)) : dk + k_step(kk);
      arch::wgmma_ss<Cfg::kBlockN, Cfg::kBf16>(rS, a, b, kk > 0 ? 1u : 0u);
    }
    arch::wgmma_commit_group();
  }
  __device__ __forceinline__ void issue_qk(int stage) { issue_qk_desc(desc_q(), desc_k(stage)); }
  // O += P V, one k16 step per 16 key rows of V (descriptor dv).
  __device__ __forceinline__ void issue_pv_desc(uint64_t dv) {
    arch::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kP; ++kk)
      arch::wgmma_rs_tnspb<Cfg::kVDim, Cfg::kBf16>(rO, rP[kk], dv + ((kk * 16 * Cfg::kSwizzleBytes) >> 4), 1u);
    arch::wgmma_commit_group();
  }
  __device__ __forceinline__ void issue_pv(int stage) { issue_pv_desc(desc_v(stage)); }

  __device__ __forceinline__ void fence_p() {
#pragma unroll
    for (int kk = 0; kk < kP; ++kk) arch::reg_fence(rP[kk]);
  }

  // P fragment for k-step kk is the accumulator pairs d[8kk+2j], d[8kk+2j+1] (no shuffles).
  __device__ __forceinline__ void convert_p() {
#pragma unroll
    for (int kk = 0; kk < kP; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) rP[kk][j] = arch::pack_f32x2<Cfg::kBf16>(rS[8 * kk + 2 * j], rS[8 * kk + 2 * j + 1]);
  }

  __device__ __forceinline__ void rescale_o(const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < kO; ++i) rO[i] *= alpha[(i >> 1) & 1];
  }

  // Ping-pong turn: wait until it is this group's turn to issue GEMMs / hand the turn to the
  // next group (cyclic: 0 -> 1 [-> 2] -> 0). Each barrier sees 128 syncs + 128 arrivals.
  // Barrier ids must be immediates, hence the switch.
  __device__ __forceinline__ void turn_begin() {
    if constexpr (Cfg::kPingPong) {
      if (wg == 0) arch::named_barrier_sync<kBarPingPongWg0, 256>();
      else if (Cfg::kNumConsumerWarpgroups == 2 || wg == 1) arch::named_barrier_sync<kBarPingPongWg1, 256>();
      else if constexpr (Cfg::kNumConsumerWarpgroups == 3) arch::named_barrier_sync<kBarPingPongWg2, 256>();
    }
  }
  __device__ __forceinline__ void turn_end() {
    if constexpr (Cfg::kPingPong) {
      if (wg == Cfg::kNumConsumerWarpgroups - 1) arch::named_barrier_arrive<kBarPingPongWg0, 256>();
      else if (wg == 0) arch::named_barrier_arrive<kBarPingPongWg1, 256>();
      else if constexpr (Cfg::kNumConsumerWarpgroups == 3) arch::named_barrier_arrive<kBarPingPongWg2, 256>();
    }
  }

  // The tile's last QK^T retired: its Q slot may be reloaded. kTmaStoreInQ: the epilogue stages
  // O there, so the kernel releases the slot after the mainloop (release_q_slot).
  __device__ __forceinline__ void release_q_slot() { bars.q.release_warp(q_slot()); }
  __device__ __forceinline__ void release_q() {
    if constexpr (!Cfg::kTmaStoreInQ) release_q_slot();
  }

  // Returns whether this thread's O rows need rescaling (always true without lazy rescaling).
  // kMask: 1 = apply the mask, 0 = tile known unmasked, -1 = test at run time.
  template <int kMask = -1>
  __device__ __forceinline__ bool mask_and_softmax(const AttnMask<Cfg::kMaskKind>& mask, Softmax& sm, int n, int m0, int row0,
                                                   float scale_log2, float (&alpha)[2]) {
    // The block's first key: varlen loads the block crossing the sequence's end shifted back to
    // keys [sk - BlockN, sk) (producer.h), so that no row of the next sequence is read.
    const int n0 = n * Cfg::kBlockN;
    const int key0 = Cfg::kVarlen && n0 + Cfg::kBlockN > mask.rule.sk ? mask.rule.sk - Cfg::kBlockN : n0;
    if constexpr (Cfg::kSoftcap) {
      if (softcap_scale != 0.f) {
        const float c = fabsf(softcap_scale);  // the sign is bounded_max()'s
#pragma unroll
        for (int i = 0; i < kS; ++i) rS[i] = arch::tanh_approx(rS[i] * c);
      }
      if (alibi_coef != 0.f) {
        // + coef * |i + sk - sq - j|: the distance from the query's diagonal.
        // In float from one conversion per tile: per score an FADD of a constant and an FFMA with
        // |.| (an int abs and I2F per score cost 13% at D=128; exact while distances < 2^24).
        const int q4 = static_cast<int>(threadIdx.x & 3);  // signed: the distance may be negative
        const float diag0 = static_cast<float>(row0 + (mask.rule.sk - mask.rule.sq) - (key0 + 2 * q4));
#pragma unroll
        for (int i = 0; i < kS; ++i) {
          const float dist = diag0 + static_cast<float>(8 * ((i >> 1) & 1) - 8 * (i >> 2) - (i & 1));
          rS[i] = fmaf(alibi_coef, fabsf(dist), rS[i]);
        }
      }
    }
    if (kMask == 1 || (kMask == -1 && mask.tile_needs_mask(n, m0, Cfg::kBlockN, Cfg::kBlockM))) {
      if constexpr (Cfg::kVarlen) {
        // The shifted block's keys below n * BlockN belong to the next block, already counted.
        mask.apply(rS, row0, key0 + 2 * (threadIdx.x & 3), n0);
      } else {
        mask.apply(rS, row0, n * Cfg::kBlockN + 2 * (threadIdx.x & 3));
      }
    }
    if constexpr (Cfg::kSoftcap && Cfg::kBf16) {
      if (bounded_max()) {
        sm.step_bounded(rS, scale_log2);
        alpha[0] = alpha[1] = 1.f;
        return false;
      }
    }
    return sm.template step<Cfg::kRescaleThreshold>(rS, scale_log2, alpha);
  }

  // O *= alpha, skipped by a whole warp when lazy rescaling left all its rows' max unchanged
  // (alpha == 1 exactly; a warp-uniform branch, outside any wgmma fence/issue sequence).
  __device__ __forceinline__ void maybe_rescale_o(bool moved, const float (&alpha)[2]) {
    if (bounded_max()) return;
    if constexpr (Cfg::kConditionalRescale) {
      if (__any_sync(0xffffffffu, moved)) rescale_o(alpha);
    } else {
      rescale_o(alpha);
    }
  }

  // Ping-pong: turns strictly cycle 0,1[,2],0,... over the whole CTA lifetime (every group takes
  // n_blocks + 1 turns per tile). The last group hands group 0 the first turn once per kernel,
  // and group 0 consumes the one surplus arrival once at exit. Doing this per tile instead could
  // let two arrivals of the last group complete group 0's barrier without group 0.
  __device__ __forceinline__ void pingpong_start() {
    if (Cfg::kPingPong && wg == Cfg::kNumConsumerWarpgroups - 1) arch::named_barrier_arrive<kBarPingPongWg0, 256>();
  }
  __device__ __forceinline__ void pingpong_finish() {
    if (Cfg::kPingPong && wg == 0) arch::named_barrier_sync<kBarPingPongWg0, 256>();
  }

  // One steady-state turn: S(n) and PV of the previously visited tile back to back, then the
  // softmax of S(n) while the PV runs. kMask: tile n needs the mask (1), not (0), test (-1).
  template <int kMask>
  __device__ __forceinline__ void overlapped_step(const AttnMask<Cfg::kMaskKind>& mask, Softmax& sm, int n, int n_lo, int m0,
                                                  int row0, float scale_log2, PipelineState<Cfg::kStages>& pv) {
    float alpha[2];
    kv.advance();
    // kEarly (V36): the turn holds the other group's GEMMs back, so its descriptors are ready
    // (pinned) before it starts; otherwise they are computed inside it.
    constexpr bool kEarly = FLASHATTN_SM90_ABL_EARLY_DESC != 0;
    uint64_t dq, dk, dv;
    if constexpr (kEarly) {
      dq = desc_q(), dk = desc_k(kv.stage), dv = desc_v(pv.stage);
      arch::reg_fence64(dq);
      arch::reg_fence64(dk);
      arch::reg_fence64(dv);
    }
    bars.k.wait_full(kv.stage, kv.phase);
    turn_begin();
    if constexpr (!kEarly) dq = desc_q(), dk = desc_k(kv.stage), dv = desc_v(pv.stage);
    issue_qk_desc<kEarly>(dq, dk);  // S(n) ...
    bars.v.wait_full(pv.stage, pv.phase);
    issue_pv_desc(dv);  // ... and O += P(n+1) V(n+1) back to back
    turn_end();
    arch::wgmma_wait_group<1>();  // S(n) done; PV still in flight under the softmax
    arch::reg_fence(rS);
    bars.k.release_warp(kv.stage);
    if (n == n_lo) release_q();
    const bool moved = mask_and_softmax<kMask>(mask, sm, n, m0, row0, scale_log2, alpha);
    arch::wgmma_wait_group<0>();
    arch::reg_fence(rO);
    fence_p();
    bars.v.release_warp(pv.stage);
    maybe_rescale_o(moved, alpha);
    convert_p();
    pv = kv;
  }

  // Runs key tiles [n_lo, n_hi) (the last first); leaves O unnormalised and the softmax state in `sm`.
  __device__ __forceinline__ void mainloop(const AttnMask<Cfg::kMaskKind>& mask, Softmax& sm, int n_lo, int n_hi, int m0,
                                           int row0, float scale_log2) {
#pragma unroll
    for (int i = 0; i < kO; ++i) rO[i] = 0.f;
    if (n_hi <= n_lo) return;
    bars.q.wait_full(q_ring);
    ++q_ring.count;  // q_slot() is now this tile's
    float alpha[2];
    if constexpr (Cfg::kIntraWarpgroupOverlap) {
      // Prologue: S(last tile) and its softmax; no PV yet.
      int n = n_hi - 1;
      bars.k.wait_full(kv.stage, kv.phase);
      turn_begin();
      issue_qk(kv.stage);
      turn_end();
      arch::wgmma_wait_group<0>();
      arch::reg_fence(rS);
      bars.k.release_warp(kv.stage);
      if (n == n_lo) release_q();  // last QK^T of this tile retired: Q may be reloaded
      mask_and_softmax(mask, sm, n, m0, row0, scale_log2, alpha);
      convert_p();
      PipelineState<Cfg::kStages> pv = kv;
      // kSplitMaskedLoop: masked key tiles (visited first) and unmasked ones in separate loops.
      if constexpr (Cfg::kSplitMaskedLoop && Cfg::kLocal) {
        // A window's masked tiles sit at both ends: [u.hi, n_hi) and [n_lo, u.lo).
        const BlockRange u = mask.rule.unmasked_n_block_range(m0 / Cfg::kBlockM, Cfg::kBlockM, Cfg::kBlockN);
        const int u_hi = max(n_lo, u.hi), u_lo = max(n_lo, u.lo);
#pragma unroll 1
        for (--n; n >= u_hi; --n) overlapped_step<1>(mask, sm, n, n_lo, m0, row0, scale_log2, pv);
#pragma unroll 1
        for (; n >= u_lo; --n) overlapped_step<0>(mask, sm, n, n_lo, m0, row0, scale_log2, pv);
#pragma unroll 1
        for (; n >= n_lo; --n) overlapped_step<1>(mask, sm, n, n_lo, m0, row0, scale_log2, pv);
      } else if constexpr (Cfg::kSplitMaskedLoop) {
        const int n_unmasked = max(n_lo, mask.num_unmasked_blocks(m0, Cfg::kBlockN));  // tiles [0, n_unmasked)
#pragma unroll 1
        for (--n; n >= n_unmasked; --n)
          overlapped_step<1>(mask, sm, n, n_lo, m0, row0, scale_log2, pv);
#pragma unroll 1
        for (; n >= n_lo; --n) overlapped_step<0>(mask, sm, n, n_lo, m0, row0, scale_log2, pv);
      } else {
#pragma unroll 1
        for (--n; n >= n_lo; --n) overlapped_step<-1>(mask, sm, n, n_lo, m0, row0, scale_log2, pv);
      }
      // Tail: PV of the last visited tile.
      bars.v.wait_full(pv.stage, pv.phase);
      turn_begin();
      issue_pv(pv.stage);
      turn_end();
      arch::wgmma_wait_group<0>();
      arch::reg_fence(rO);
      fence_p();
      bars.v.release_warp(pv.stage);
      kv.advance();
    } else {
#pragma unroll 1
      for (int n = n_hi - 1; n >= n_lo; --n) {
        bars.k.wait_full(kv.stage, kv.phase);
        issue_qk(kv.stage);
        arch::wgmma_wait_group<0>();
        arch::reg_fence(rS);
        bars.k.release_warp(kv.stage);
        if (n == n_lo) release_q();
        const bool moved = mask_and_softmax(mask, sm, n, m0, row0, scale_log2, alpha);
        maybe_rescale_o(moved, alpha);
        convert_p();
        bars.v.wait_full(kv.stage, kv.phase);
        issue_pv(kv.stage);
        arch::wgmma_wait_group<0>();
        arch::reg_fence(rO);
        fence_p();
        bars.v.release_warp(kv.stage);
        kv.advance();
      }
    }
  }
};

}  // namespace flashattn::sm90
