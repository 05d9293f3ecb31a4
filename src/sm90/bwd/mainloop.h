// One MMA warpgroup of the sm90 backward: 64 keys' dK and dV live in its registers while it walks
// the query blocks. Per block: S^T = K Q^T and dP^T = V dO^T (SS wgmma, keys as M), P^T and
// dS^T in registers, dV += P^T dO and dK += dS^T Q (RS wgmma, P and dS straight from the
// accumulators), dS^T to shared memory, dQ = dS K (SS wgmma, both operands MN-major), and dQ
// staged for the dQ writer (bwd/dq_writer.h), which adds it into the fp32 accumulator.
#pragma once

#include <cstdint>

#include "arch/convert.h"
#include "arch/fast_math.h"
#include "arch/ldmatrix.h"
#include "arch/mbarrier.h"
#include "arch/named_barrier.h"
#include "arch/regs.h"
#include "arch/tma.h"
#include "arch/wgmma.h"
#include "sm90/barriers.h"
#include "sm90/bwd/config.h"
#include "sm90/bwd/kernel_args.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

template <class Cfg>
struct BwdMma {
  static constexpr int kS = Cfg::kSRegs;
  static constexpr int kAcc = Cfg::kAccRegs;
  static constexpr int kK = Cfg::kKSteps;

  uint32_t smem;     // shared-window address of the 1 KiB aligned base
  uint8_t* smem_gp;  // the same base as a generic pointer
  int wg;            // MMA warpgroup 0 or 1: keys [64 wg, 64 wg + 64) of the CTA's block
  int t;             // thread in the warpgroup
  float rdK[kAcc];
  float rdV[kAcc];

  __device__ __forceinline__ int row_local() const { return 16 * (t >> 5) + ((t & 31) >> 2); }

  // K-major operand of 64-row slices (K or V rows of this group; Q or dO of a stage).
  __device__ __forceinline__ static uint64_t desc_kmajor(uint32_t base) { return arch::make_smem_desc<128>(base, 16, 1024); }
  // MN-major operand: rows are the k dimension (16 rows = 2048 B per step), LBO steps a 64-column box.
  __device__ __forceinline__ static uint64_t desc_mnmajor(uint32_t base, uint32_t box_bytes) {
    return arch::make_smem_desc<128>(base, box_bytes, 1024);
  }

  // acc (+)= A_rows(64 x D) * B_rows(kBlockM x D)^T, both K-major tiles of D columns.
  __device__ __forceinline__ static void gemm_rows_t(float (&acc)[kS], uint32_t a_base, uint32_t b_base) {
    const uint64_t da = desc_kmajor(a_base), db = desc_kmajor(b_base);
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
      const uint64_t oa = ((kk / 4) * Cfg::kKBoxBytes + (kk % 4) * 32) >> 4;
      const uint64_t ob = ((kk / 4) * Cfg::kQBoxBytes + (kk % 4) * 32) >> 4;
      arch::wgmma_ss<Cfg::kBlockM, Cfg::kBf16>(acc, da + oa, db + ob, kk > 0 ? 1u : 0u);
    }
  }

  // acc += A(registers, 64 x kBlockM) * B(kBlockM x kAccN, MN-major stage tile from b_base).
  __device__ __forceinline__ static void gemm_acc(float (&acc)[kAcc], const uint32_t (&a)[kK][4], uint32_t b_base) {
    const uint64_t db = desc_mnmajor(b_base, Cfg::kQBoxBytes);
#pragma unroll
    for (int kk = 0; kk < kK; ++kk) arch::wgmma_rs_tnspb<Cfg::kAccN, Cfg::kBf16>(acc, a[kk], db + ((kk * 2048) >> 4), 1u);
  }
  // This group's dK / dV columns in a stage tile (kSplitD: its half's boxes).
  __device__ __forceinline__ uint32_t acc_cols(uint32_t tile) const {
    return Cfg::kSplitD ? tile + wg * (Cfg::kAccN / 64) * Cfg::kQBoxBytes : tile;
  }

  // P^T or dS^T as RS A fragments: k-step kk is accumulator pairs 8kk+2j, 8kk+2j+1.
  __device__ __forceinline__ static void to_frags(const float (&x)[kS], uint32_t (&f)[kK][4]) {
#pragma unroll
    for (int kk = 0; kk < kK; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) f[kk][j] = arch::pack_f32x2<Cfg::kBf16>(x[8 * kk + 2 * j], x[8 * kk + 2 * j + 1]);
  }

  // dS^T (this group's 64 key rows) into the swizzled MN-major tile dQ = dS K reads: element
  // (key n, query m) sits in box m / 64, row n, 16-byte chunk ((m % 64) / 8) ^ (n % 8). Per
  // k-step kk the four fragments f[kk][j] are 8x8 matrices (keys 16 w + 8 (j & 1) + 0..7, queries
  // 16 kk + 8 (j >> 1) + 0..7) in the fragment layout stmatrix takes: one stmatrix per k-step,
  // lane l giving row l % 8 of matrix l / 8 (16 bytes, one swizzle chunk).
  // kSplitD: both groups hold the same 64 rows; each stores half of the query columns.
  __device__ __forceinline__ void store_ds(const uint32_t (&f)[kK][4], int buf) const {
    if constexpr (!Cfg::kStmatrixDs) {
      store_ds_words(f, buf);
      return;
    }
    const int lane = t & 31, j = lane >> 3;
    const int n = Cfg::kGroupKeys * wg + 16 * (t >> 5) + (lane & 7) + 8 * (j & 1);
#pragma unroll
    for (int kk = 0; kk < kK; ++kk) {
      // A compile-time kk with a run-time test: f indexed by a run-time step would go to memory.
      if (Cfg::kSplitD && kk / (kK / 2) != wg) continue;
      const int m = 16 * kk + 8 * (j >> 1);
      const uint32_t addr = smem + Cfg::kSmemDs + buf * Cfg::kDsBytes + (m >> 6) * Cfg::kDsBoxBytes + n * 128 +
                            ((((m & 63) >> 3) ^ (n & 7)) << 4);
      arch::stmatrix_x4(addr, f[kk]);
    }
  }

  // The same with one 32-bit store per fragment register (BwdConfig::kStmatrixDs off).
  __device__ __forceinline__ void store_ds_words(const uint32_t (&f)[kK][4], int buf) const {
    const int q4 = t & 3;
#pragma unroll
    for (int kk = 0; kk < kK; ++kk) {
      if (Cfg::kSplitD && kk / (kK / 2) != wg) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 8 * kk + 2 * j;  // accumulator index of the pair
        const int n = Cfg::kGroupKeys * wg + row_local() + 8 * ((i >> 1) & 1);
        const int m = 8 * (i >> 2) + 2 * q4;
        const uint32_t addr = smem + Cfg::kSmemDs + buf * Cfg::kDsBytes + (m >> 6) * Cfg::kDsBoxBytes + n * 128 +
                              ((((m & 63) >> 3) ^ (n & 7)) << 4) + 4 * q4;
        arch::st_shared_b32(addr, f[kk][j]);
      }
    }
  }

  // One query block: ring stage `st`, dS^T buffer `buf`. Ends with this group's dQ staged for
  // the dQ writer (full/empty barriers `dq`, one staging buffer).
  // kDqInStage: dQ goes over this group's halves of the stage's Q and dO tiles, `dq` has one full
  // barrier per stage and the dQ writer releases the stage (dq_phase unused).
  // The feature kernel (kLocal, Sm90BwdFeatureArgs): the window's both edges in the mask, and
  // the run-time softcap (args.softcap_scale > 0) and ALiBi (alibi_coef != 0, in units of the
  // score exp2 takes) recomputed as the forward applied them; dS^T then carries softcap's
  // 1 - t^2 into dK and dQ.
  template <MaskKind Kind, class DqRing, class Args>
  __device__ __forceinline__ void step(MbarRing<Cfg::kStages>& ring, const PipelineState<Cfg::kStages>& st, int buf,
                                       DqRing& dq, uint32_t dq_phase, int key0, int m0, bool need_mask,
                                       const Args& args, float alibi_coef) {
    const uint32_t q_base = smem + Cfg::kSmemQ + st.stage * Cfg::kQBytes;
    const uint32_t do_base = smem + Cfg::kSmemDo + st.stage * Cfg::kQBytes;
    float rS[kS], rdP[kS];
    ring.wait_full(st.stage, st.phase);
    arch::wgmma_fence();
    gemm_rows_t(rS, smem + Cfg::kSmemK + Cfg::kGroupKeys * wg * 128, q_base);
    gemm_rows_t(rdP, smem + Cfg::kSmemV + Cfg::kGroupKeys * wg * 128, do_base);
    arch::wgmma_commit_group();
    arch::wgmma_wait_group<0>();
    arch::reg_fence(rS);
    arch::reg_fence(rdP);
    // P^T = exp2(scale_log2 S^T - lse_log2) (0 where masked), dS^T = P^T (dP^T - dsum).
    const float* lse = reinterpret_cast<const float*>(smem_gp + Cfg::kSmemLse + st.stage * Cfg::kRowStatBytes);
    const float* dsum = reinterpret_cast<const float*>(smem_gp + Cfg::kSmemDsum + st.stage * Cfg::kRowStatBytes);
    const int q4 = t & 3;
    const int key_a = key0 + row_local(), key_b = key_a + 8;
    if constexpr (Kind == MaskKind::kLocal) {
      // Softcap and ALiBi are run-time switches of the kernel; kWindowOnlyPass: a call with
      // neither (a window alone) takes a copy of the score pass without their per-score work.
      if constexpr (Cfg::kWindowOnlyPass) {
        if (args.softcap_scale > 0.f || alibi_coef != 0.f)
          step_scores_local<true>(rS, rdP, lse, dsum, key_a, m0, need_mask, args, alibi_coef);
        else
          step_scores_local<false>(rS, rdP, lse, dsum, key_a, m0, need_mask, args, alibi_coef);
      } else {
        step_scores_local<true>(rS, rdP, lse, dsum, key_a, m0, need_mask, args, alibi_coef);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kS / 4; ++j) {
        const int col = 8 * j + 2 * q4;
        const float2 l = *reinterpret_cast<const float2*>(lse + col);
        const float2 ds = *reinterpret_cast<const float2*>(dsum + col);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = 4 * j + e;
          const float li = (e & 1) ? l.y : l.x;
          const float di = (e & 1) ? ds.y : ds.x;
          float p = arch::ex2_approx_ftz(rS[i] * args.scale_log2 - li);
          if (need_mask) {
            const int key = (e & 2) ? key_b : key_a;
            const int m = m0 + col + (e & 1);
            int lim = args.sk;
            if constexpr (Kind == MaskKind::kCausal) lim = min(lim, max(0, m + (args.sk - args.sq) + 1));
            if (key >= lim) p = 0.f;
          }
          rS[i] = p;
          rdP[i] = p * (rdP[i] - di);
        }
      }
    }
    uint32_t fP[kK][4], fdS[kK][4];
    to_frags(rS, fP);
    to_frags(rdP, fdS);
    arch::wgmma_fence();
    gemm_acc(rdV, fP, acc_cols(do_base));
    gemm_acc(rdK, fdS, acc_cols(q_base));
    arch::wgmma_commit_group();
    store_ds(fdS, buf);
    arch::fence_proxy_async_shared_cta();  // dS^T stores before the dQ wgmma reads them
    arch::named_barrier_sync<kBarBwdDsReady, 256>();

    if constexpr (Cfg::kDqInStage) {
      finish_dq_in_stage(st, buf, dq, fP, fdS);
    } else {
      finish_dq(ring, st, buf, dq, dq_phase, fP, fdS);
    }
  }

  // P^T and dS^T of the feature kernel from the raw S^T (rS) and dP^T (rdP) accumulators, in
  // place. Per element (query m, key n): x = S, or t = tanh(S * softcap_scale) under softcap;
  // x += alibi_coef * |m + sk - sq - n|; P = exp2(x * scale_log2 - lse_log2), 0 outside the
  // window [key_begin(m), key_end(m)); dS = P (dP - dsum), times 1 - t^2 under softcap (the
  // derivative of softcap * tanh(scale S / softcap) w.r.t. scale S; dK's and dQ's final
  // `* scale` supply the rest).
  // kMods: the softcap and ALiBi switches are read (else both are off).
  template <bool kMods, class Args>
  __device__ __forceinline__ void step_scores_local(float (&rS)[kS], float (&rdP)[kS], const float* lse, const float* dsum,
                                                    int key_a, int m0, bool need_mask, const Args& args,
                                                    float alibi_coef) const {
    const int q4 = t & 3;
    const bool softcap = kMods && args.softcap_scale > 0.f;
    // Element (j, e) sits at query m0 + 8j + 2q4 + (e & 1), key key_a + 8 ((e >> 1) & 1): its
    // distance i + sk - sq - j is d0 + c, c = 8j + (e & 1) - 8 ((e >> 1) & 1) a compile-time
    // constant. ALiBi takes it in float (one conversion per step; exact below 2^24), the window
    // as one unsigned compare: key_begin <= key <= i + sk - sq + right iff
    // -right <= d0 + c <= left, i.e. (unsigned)(d0 + c + right) <= left + right.
    const int d0 = m0 + 2 * q4 + (args.sk - args.sq) - key_a;
    const float diag0 = static_cast<float>(d0);
    const int win_base = d0 + args.window_right;
    const uint32_t win_span = static_cast<uint32_t>(args.window_left + args.window_right);
    const bool key_a_in = key_a < args.sk, key_b_in = key_a + 8 < args.sk;
    // Three in-place passes, so no per-element value outlives its pass (the D=64 kernel spilled
    // with t and 1 - t^2 carried through one loop): t = tanh(S * softcap_scale) into rS (as the
    // forward); dP - dsum, times 1 - t^2 under softcap, into rdP; then P into rS and dS = P (dP -
    // dsum) g into rdP.
    if (softcap) {
#pragma unroll
      for (int i = 0; i < kS; ++i) rS[i] = arch::tanh_approx(rS[i] * args.softcap_scale);
    }
#pragma unroll
    for (int j = 0; j < kS / 4; ++j) {
      const float2 ds = *reinterpret_cast<const float2*>(dsum + 8 * j + 2 * q4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * j + e;
        const float di = (e & 1) ? ds.y : ds.x;
        // d x / d (scale S) in units of softcap: 1 - t^2 (1 without softcap).
        if constexpr (kMods) {
          const float g = softcap ? fmaf(-rS[i], rS[i], 1.f) : 1.f;
          rdP[i] = (rdP[i] - di) * g;
        } else {
          rdP[i] = rdP[i] - di;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kS / 4; ++j) {
      const float2 l = *reinterpret_cast<const float2*>(lse + 8 * j + 2 * q4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * j + e;
        const float li = (e & 1) ? l.y : l.x;
        const int c = 8 * j + (e & 1) - 8 * ((e >> 1) & 1);
        const float x = kMods ? fmaf(alibi_coef, fabsf(diag0 + static_cast<float>(c)), rS[i]) : rS[i];
        float p = arch::ex2_approx_ftz(x * args.scale_log2 - li);
        if (need_mask) {
          const bool key_in = (e & 2) ? key_b_in : key_a_in;
          if (!key_in || static_cast<uint32_t>(win_base + c) > win_span) p = 0.f;
        }
        rS[i] = p;
        rdP[i] *= p;
      }
    }
  }

  // dQ = dS K for this group's rows/columns, staged for the dQ writer in its own buffer.
  template <class DqRing>
  __device__ __forceinline__ void finish_dq(MbarRing<Cfg::kStages>& ring, const PipelineState<Cfg::kStages>& st, int buf,
                                            DqRing& dq, uint32_t dq_phase, uint32_t (&fP)[kK][4], uint32_t (&fdS)[kK][4]) {
    float rdQ[Cfg::kDqRegs];
    {
      const uint32_t ds = smem + Cfg::kSmemDs + buf * Cfg::kDsBytes;
      const uint64_t da = desc_mnmajor(ds + (Cfg::dq_row0(wg) / 64) * Cfg::kDsBoxBytes, Cfg::kDsBoxBytes);
      const uint64_t db = desc_mnmajor(smem + Cfg::kSmemK + (Cfg::dq_col0(wg) / 64) * Cfg::kKBoxBytes, Cfg::kKBoxBytes);
      arch::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
        arch::wgmma_ss_tnspab<Cfg::kDqN, Cfg::kBf16>(rdQ, da + ((kk * 2048) >> 4), db + ((kk * 2048) >> 4), kk > 0 ? 1u : 0u);
      arch::wgmma_commit_group();
    }
    arch::wgmma_wait_group<0>();
    arch::reg_fence(rdQ);
    arch::reg_fence(rdV);
    arch::reg_fence(rdK);
#pragma unroll
    for (int kk = 0; kk < kK; ++kk) {
      arch::reg_fence(fP[kk]);
      arch::reg_fence(fdS[kk]);
    }
    // Every thread's reads of the stage's lse/dsum (plain loads, unlike the wgmma reads of Q/dO)
    // happen before its own arrive releases the stage to the next bulk copy.
    ring.release_thread(st.stage);
    // dQ to the staging once the writer's last reduction has read it; each warp then arrives.
    dq.wait_empty(0, dq_phase);
    float4* dq_stage = reinterpret_cast<float4*>(smem_gp + Cfg::kSmemDq);
#pragma unroll
    for (int i = 0; i < Cfg::kDqVec; ++i)
      dq_stage[(wg * Cfg::kDqVec + i) * 128 + t] = make_float4(rdQ[4 * i], rdQ[4 * i + 1], rdQ[4 * i + 2], rdQ[4 * i + 3]);
    arch::fence_proxy_async_shared_cta();
    __syncwarp();
    if ((t & 31) == 0) arch::mbarrier_arrive(dq.full_bar(0));
  }

  // kDqInStage: dQ in two 64-column passes (32 accumulators live, not 64), each staged over one
  // of this group's halves of the stage once the first pass's wait has retired this group's
  // dV/dK GEMMs (the readers of those halves; the other group reads only its own): the first
  // pass's columns over Q's, the second's over dO's (16 KiB each). Each warp arrives on the
  // stage's dQ barrier; the dQ writer releases the stage.
  template <class DqRing>
  __device__ __forceinline__ void finish_dq_in_stage(const PipelineState<Cfg::kStages>& st, int buf, DqRing& dq,
                                                     uint32_t (&fP)[kK][4], uint32_t (&fdS)[kK][4]) {
    static_assert(Cfg::kDqN == 128 && !Cfg::kDqSplitRows, "two passes of 64 columns");
    const uint32_t ds = smem + Cfg::kSmemDs + buf * Cfg::kDsBytes;
    const uint64_t da = desc_mnmajor(ds, Cfg::kDsBoxBytes);
    const uint32_t half = wg * (Cfg::kAccN / 64) * Cfg::kQBoxBytes;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      float rdQ[32];
      const uint64_t db =
          desc_mnmajor(smem + Cfg::kSmemK + (Cfg::dq_col0(wg) / 64 + pass) * Cfg::kKBoxBytes, Cfg::kKBoxBytes);
      arch::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
        arch::wgmma_ss_tnspab<64, Cfg::kBf16>(rdQ, da + ((kk * 2048) >> 4), db + ((kk * 2048) >> 4), kk > 0 ? 1u : 0u);
      arch::wgmma_commit_group();
      arch::wgmma_wait_group<0>();
      arch::reg_fence(rdQ);
      if (pass == 0) {  // dV/dK retired with this wait: their operands may be reused from here
        arch::reg_fence(rdV);
        arch::reg_fence(rdK);
#pragma unroll
        for (int kk = 0; kk < kK; ++kk) {
          arch::reg_fence(fP[kk]);
          arch::reg_fence(fdS[kk]);
        }
      }
      // Pass p's float4 i is accumulator float4 (2p + wg) * 8 + i (BwdConfig::dq_element).
      float4* dst = reinterpret_cast<float4*>(smem_gp + (pass == 0 ? Cfg::kSmemQ : Cfg::kSmemDo) +
                                              st.stage * Cfg::kQBytes + half);
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i * 128 + t] = make_float4(rdQ[4 * i], rdQ[4 * i + 1], rdQ[4 * i + 2], rdQ[4 * i + 3]);
    }
    arch::fence_proxy_async_shared_cta();
    __syncwarp();  // every lane's lse/dsum reads and staging writes before lane 0 arrives
    if ((t & 31) == 0) arch::mbarrier_arrive(dq.full_bar(st.stage));
  }

  // dV and scale * dK of keys [key0, key0 + 64) to global (rows past sk are not written).
  // kStagedDkDv: through shared memory, so that global rows go out in 16-byte pieces (the
  // accumulator layout alone writes 4-byte pairs spread over 8 rows per warp store). The ring's
  // Q and dO stages are idle once both groups are past their last block (every load issued was
  // consumed, the last dV/dK GEMMs retired before the loop's last wait): group g's dK and dV
  // take 64 rows each there, rows of kHeadDim elements with their 16-byte chunks XOR-swizzled by
  // row (the 8 rows of one warp store fall on distinct banks).
  template <class Elem>
  __device__ __forceinline__ void store_dkdv(const Sm90BwdArgs& args, int b, int hk, int key0) const {
    if constexpr (Cfg::kStagedDkDv) {
      store_dkdv_staged<Elem>(args, b, hk, key0);
      return;
    }
    store_dkdv_direct<Elem>(args, b, hk, key0);
  }

  template <class Elem>
  __device__ __forceinline__ void store_dkdv_staged(const Sm90BwdArgs& args, int b, int hk, int key0) const {
    constexpr int kRowBytes = Cfg::kHeadDim * 2;
    constexpr int kChunks = Cfg::kHeadDim / 8;  // 16-byte chunks per row
    static_assert(!Cfg::kSplitD && 4 * 64 * kRowBytes <= 2 * Cfg::kStages * Cfg::kQBytes,
                  "both groups' dK and dV fit the Q and dO stages");
    uint8_t* tile_k = smem_gp + Cfg::kSmemQ + wg * 2 * 64 * kRowBytes;
    uint8_t* tile_v = tile_k + 64 * kRowBytes;
    arch::named_barrier_sync<kBarBwdDsReady, 256>();  // both groups past their last GEMM
    const int q4 = t & 3;
#pragma unroll
    for (int i = 0; i < kAcc; i += 2) {
      const int r = row_local() + 8 * ((i >> 1) & 1);
      const int c = i >> 2;  // 16-byte chunk of columns 8c..8c+7
      const int off = r * kRowBytes + ((c ^ (r & 7)) << 4) + 4 * q4;
      *reinterpret_cast<uint32_t*>(tile_k + off) = arch::pack_f32x2<Cfg::kBf16>(rdK[i] * args.scale, rdK[i + 1] * args.scale);
      *reinterpret_cast<uint32_t*>(tile_v + off) = arch::pack_f32x2<Cfg::kBf16>(rdV[i], rdV[i + 1]);
    }
    arch::named_barrier_sync<kBarBwdDsReady, 256>();
    Elem* dk = static_cast<Elem*>(args.dk);
    Elem* dv = static_cast<Elem*>(args.dv);
    const bool vec_k = ((reinterpret_cast<uintptr_t>(dk) | static_cast<uintptr_t>(args.dk_sb | args.dk_ss | args.dk_sh) * 2) & 15) == 0;
    const bool vec_v = ((reinterpret_cast<uintptr_t>(dv) | static_cast<uintptr_t>(args.dv_sb | args.dv_ss | args.dv_sh) * 2) & 15) == 0;
    for (int idx = t; idx < 64 * kChunks; idx += 128) {
      const int r = idx / kChunks, c = idx % kChunks;
      const int key = key0 + r;
      if (key >= args.sk) continue;
      const int src = r * kRowBytes + ((c ^ (r & 7)) << 4);
      // Columns past the caller's head dims (zero-filled inputs) are not written; d and d_v are
      // multiples of 8, so a chunk is all in or all out.
      if (8 * c < args.d) {
        Elem* dst = dk + b * args.dk_sb + key * args.dk_ss + hk * args.dk_sh + 8 * c;
        if (vec_k) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(tile_k + src);
        else
#pragma unroll
          for (int e = 0; e < 8; ++e) dst[e] = reinterpret_cast<const Elem*>(tile_k + src)[e];
      }
      if (8 * c < args.d_v) {
        Elem* dst = dv + b * args.dv_sb + key * args.dv_ss + hk * args.dv_sh + 8 * c;
        if (vec_v) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(tile_v + src);
        else
#pragma unroll
          for (int e = 0; e < 8; ++e) dst[e] = reinterpret_cast<const Elem*>(tile_v + src)[e];
      }
    }
  }

  template <class Elem>
  __device__ __forceinline__ void store_dkdv_direct(const Sm90BwdArgs& args, int b, int hk, int key0) const {
    const int q4 = t & 3;
    Elem* dk = static_cast<Elem*>(args.dk);
    Elem* dv = static_cast<Elem*>(args.dv);
#pragma unroll
    for (int i = 0; i < kAcc; i += 2) {
      const int key = key0 + row_local() + 8 * ((i >> 1) & 1);
      const int d = (Cfg::kSplitD ? wg * Cfg::kAccN : 0) + 8 * (i >> 2) + 2 * q4;
      if (key < args.sk) {
        const int64_t ok = b * args.dk_sb + key * args.dk_ss + hk * args.dk_sh + d;
        const int64_t ov = b * args.dv_sb + key * args.dv_ss + hk * args.dv_sh + d;
        // Columns past the caller's head dims (zero-filled inputs) are not written.
        if (d < args.d)
          *reinterpret_cast<uint32_t*>(dk + ok) = arch::pack_f32x2<Cfg::kBf16>(rdK[i] * args.scale, rdK[i + 1] * args.scale);
        if (d < args.d_v) *reinterpret_cast<uint32_t*>(dv + ov) = arch::pack_f32x2<Cfg::kBf16>(rdV[i], rdV[i + 1]);
      }
    }
  }
};

}  // namespace flashattn::sm90
