// The sm80 backward kernel (FlashAttention-2's backward structure; bwd/config.h says which warps
// own what). Grid (key blocks, kv heads, batch): one CTA per key block, K and V loaded once by
// cp.async, then per (query head of the group, query block) Q, dO, lse and dsum (double-buffered
// under Sm80BwdOptions::double_buffer), and per query block:
//   1. S^T = K Q^T and dP^T = V dO^T on the S^T warp grid; P^T and dS^T computed in registers
//      (or by local_scores under kLocal) and stored to shared memory, keys x queries.
//   2. barrier; dV += P^T dO and dK += dS^T Q on the dK / dV warp grid, A from shared memory.
//   3. dQ = dS K on the dQ warp grid (dS^T read transposed), added into the accumulator.
//   Under Sm80BwdOptions::dq_first, 3 comes before 2.
// Under a causal mask a key block's query blocks start at Mask::m_block_range's lo and only those
// below first_unmasked_m_block take the element-wise rule; so does a partial last key block.
// Sliding window, softcap, ALiBi (MaskKind::kLocal, the feature kernel, Sm80BwdFeatureArgs): a
// key block's query blocks are bounded on both sides (Mask::m_block_range), the ones outside
// Mask::unmasked_m_block_range (both ends of the window; local_needs_mask) take the
// element-wise rule, softcap and ALiBi are run-time switches recomputing the scores as the
// forward did, and softcap's 1 - t^2 goes into dS. The kNone / kCausal kernels keep their code
// (every addition is `if constexpr`).
// Varlen (Cfg::kVarlen, bwd/config.h Sm80BwdVarlen): blockIdx.z is the sequence; the CTA clamps
// its offsets (common/varlen_layout.h), exits past its keys, and runs the same body with the
// sequence's lengths (len_q() / len_k()), packed rows and padded scratch rows; rows outside the
// sequence load as zeros (cp.async zero-fill), so no other sequence's row reaches a GEMM.
// Deterministic mode (dq_turn != null): the CTAs visiting a query block add their dQ in a fixed
// order, ascending key blocks, or under a causal mask descending from the query block's last key
// block, with the grid launched in that order too, so a CTA only waits on CTAs launched before it.
// kLocal stays ascending, each key block's place counted from the query block's first key block
// (Mask::n_block_range's lo): every key block from there to this one visits that query block
// (a window's visible pairs are contiguous both ways) and launched before this CTA.
#pragma once

#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "arch/convert.h"
#include "arch/cp_async.h"
#include "arch/fast_math.h"
#include "arch/ldmatrix.h"
#include "arch/mma_sm80.h"
#include "arch/red.h"
#include "arch/smem.h"
#include "common/mask.h"
#include "common/varlen_layout.h"
#include "sm80/bwd/config.h"
#include "sm80/bwd/kernel_args.h"
#include "sm80/smem_tile.h"
#include "sm80/warp_gemm.h"

namespace flashattn::sm80 {

// LaneAddr (warp_gemm.h) over the dS^T tile, whose rows are kBlockM b16 wide.
template <class Cfg>
struct BwdDsShape {
  static constexpr int kHeadDim = Cfg::kBlockM;
  static constexpr bool kSwizzle = Cfg::kSwizzle;
};

// P^T and dS^T of the feature kernel (kLocal) from the raw S^T (rS) and dP^T (rP) of one query
// slice, in place. Element (nt, e) is query q0 + 8 nt + 2 (lane % 4) + (e & 1), key key_r +
// 8 (e >> 1); its distance to the diagonal i + sk - sq - j is d0 + c, c = 8 nt + (e & 1) -
// 8 (e >> 1) a compile-time constant. x = S, or t = tanh(S * softcap_scale) under softcap;
// x += alibi_coef * |d0 + c| (ALiBi, the slope of batch b, query head h); P = exp2(x *
// scale_log2 - lse_log2), 0 outside the window (-right <= d0 + c <= left, one unsigned compare)
// and past sk; dS = P (dP - dsum), times 1 - t^2 under softcap (the derivative of softcap *
// tanh(scale S / softcap) w.r.t. scale S; dK's and dQ's final `* scale` supply the rest). Three
// in-place passes as sm90's step_scores_local, so no per-element value outlives its pass (the
// dK / dV accumulators leave few registers).
// lse / dsum: the stage's rows as float2 pairs, stat0 the slice's first 8-row group.
// kMods: the softcap and ALiBi switches are read (else both are off: a window-only call).
template <int kNTq, bool kMods, class Args>
__device__ __forceinline__ void local_scores(float (&rS)[kNTq][4], float (&rP)[kNTq][4], const float2* lse,
                                             const float2* dsum, const Args& p, int sq, int sk, int b, int h,
                                             int q0, int key_r, int stat0, int lane, bool need_mask) {
  const bool softcap = kMods && p.softcap_scale > 0.f;
  // ALiBi: -slope * |i + sk - sq - j| in units of the score exp2 takes (S, or t under softcap),
  // as the forward adds it. Read per slice (an L1 hit after the first): kept across the block,
  // it is one more live register where the D=256 kernel has none to spare.
  float alibi_coef = 0.f;
  if (kMods && p.alibi != nullptr) alibi_coef = -p.alibi[b * p.alibi_bstride + h] * detail::kLog2e / p.scale_log2;
  const int d0 = q0 + 2 * (lane & 3) + (sk - sq) - key_r;
  const float diag0 = static_cast<float>(d0);
  const int win_base = d0 + p.window_right;
  const uint32_t win_span = static_cast<uint32_t>(p.window_left + p.window_right);
  const bool key_a_in = key_r < sk, key_b_in = key_r + 8 < sk;
  if (softcap) {
#pragma unroll
    for (int nt = 0; nt < kNTq; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) rS[nt][e] = arch::tanh_approx(rS[nt][e] * p.softcap_scale);
  }
#pragma unroll
  for (int nt = 0; nt < kNTq; ++nt) {
    const float2 ds = dsum[(stat0 + nt) * 4 + (lane & 3)];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float g = softcap ? fmaf(-rS[nt][e], rS[nt][e], 1.f) : 1.f;  // softcap: false when !kMods
      rP[nt][e] = (rP[nt][e] - ((e & 1) ? ds.y : ds.x)) * g;
    }
  }
#pragma unroll
  for (int nt = 0; nt < kNTq; ++nt) {
    const float2 l = lse[(stat0 + nt) * 4 + (lane & 3)];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = 8 * nt + (e & 1) - 8 * (e >> 1);
      const float x = kMods ? fmaf(alibi_coef, fabsf(diag0 + static_cast<float>(c)), rS[nt][e]) : rS[nt][e];
      float pv = arch::ex2_approx_ftz(fmaf(x, p.scale_log2, -((e & 1) ? l.y : l.x)));
      if (need_mask) {
        const bool key_in = (e & 2) ? key_b_in : key_a_in;
        if (!key_in || static_cast<uint32_t>(win_base + c) > win_span) pv = 0.f;
      }
      rS[nt][e] = pv;
      rP[nt][e] *= pv;
    }
  }
}

// kLocal: whether some row of query block m0 / kBM misses some key of key block n0 / kBN, i.e.
// the block lies outside Mask::unmasked_m_block_range (both ends of the window, and a key block
// past sk). The rows see every key iff the first row sees the last key (d >= -right) and the
// last row the first key (d <= left), d = i + sk - sq - j; 32-bit arithmetic (|d| <= sq + sk +
// kBN). Recomputed per query block: keeping the range's two ends live through the loop made the
// D=256 kernel spill.
template <int kBM, int kBN, class Args>
__device__ __forceinline__ bool local_needs_mask(const Args& p, int sq, int sk, int m0, int n0) {
  const int n_last = n0 + kBN - 1;
  const int row_last = min(m0 + kBM, sq) - 1;
  return n_last >= sk || m0 + (sk - sq) - n_last < -p.window_right || row_last + (sk - sq) - n0 > p.window_left;
}

// The visibility rule of the call (varlen: of the CTA's sequence, lengths sq / sk): kLocal carries
// the window (bounded form, kernel_args.h).
template <MaskKind Kind, class Args>
__device__ __forceinline__ Mask<Kind> bwd_rule(const Args& p, int sq, int sk) {
  if constexpr (Kind == MaskKind::kLocal) return Mask<Kind>{sq, sk, p.window_left, p.window_right};
  else return Mask<Kind>{sq, sk};
}

template <class Cfg, class Elem, MaskKind Kind>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm80_bwd_kernel(const __grid_constant__ Sm80BwdArgsOf<Kind, Cfg::kVarlen> p) {
  constexpr bool kBf16 = std::is_same_v<Elem, __nv_bfloat16>;
  constexpr bool kCausal = Kind == MaskKind::kCausal;
  constexpr bool kLocal = Kind == MaskKind::kLocal;
  // dQ's adds as red.v2 (1), and from one lane pointer (2) (config.h FLASHATTN_SM80_ABL_BWD_RED_DQ).
  constexpr bool kRedDq = FLASHATTN_SM80_ABL_BWD_RED_DQ != 0 && Cfg::kVectorAtomics;
  constexpr bool kRedLanePtr = kRedDq && FLASHATTN_SM80_ABL_BWD_RED_DQ == 2;
  static_assert(!Cfg::kDqFragOrder || kRedLanePtr, "dq_frag_order adds from one lane pointer with red");
  constexpr int kBM = Cfg::kBlockM, kBN = Cfg::kBlockN, kD = Cfg::kHeadDim;
  constexpr int kNTq = Cfg::kNTq, kSdpMT = Cfg::kSdpMT, kDkvMT = Cfg::kDkvMT, kNTc = Cfg::kNTcols;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t s0 = arch::smem_u32(smem);
  const uint32_t sK = s0 + Cfg::kSmemK, sV = s0 + Cfg::kSmemV;
  const uint32_t sPt = s0 + Cfg::kSmemP, sDs = s0 + Cfg::kSmemDs;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool deterministic = p.dq_turn != nullptr;
  const int n_block = kCausal && deterministic ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int hk = blockIdx.y, b = blockIdx.z;
  // Varlen: blockIdx.z is the sequence; its lengths, first packed rows and scratch rows.
  // Dense kernels read the lengths from the parameter block at each use, as they always have
  // (their code stays the same).
  int seq_q = 0, seq_k = 0;
  int64_t q_row0 = 0, k_row0 = 0, stat_row0 = 0;
  if constexpr (Cfg::kVarlen) {
    const detail::VarlenRows rq = detail::varlen_rows(p.cu_q, b, p.sq, p.total_q);
    const detail::VarlenRows rk = detail::varlen_rows(p.cu_k, b, p.sk, p.total_k);
    seq_q = rq.len;
    seq_k = rk.len;
    q_row0 = rq.start;
    k_row0 = rk.start;
    stat_row0 = detail::VarlenLayout<kBM>{p.cu_q, 0, p.sq, p.total_q}.first_block(b) * kBM;
    if (n_block * kBN >= seq_k) return;  // past this sequence's keys (the grid covers the longest)
  }
  auto len_q = [&] {
    if constexpr (Cfg::kVarlen) return seq_q;
    else return p.sq;
  };
  auto len_k = [&] {
    if constexpr (Cfg::kVarlen) return seq_k;
    else return p.sk;
  };
  // Element offset of this CTA's batch (varlen: of its sequence's first row) in a tensor.
  auto batch_off = [&](int64_t sb, int64_t ss, int64_t row0) { return Cfg::kVarlen ? row0 * ss : b * sb; };
  // Scratch row of (this batch, head h, query row 0).
  auto stat_base = [&](int h) {
    return Cfg::kVarlen ? static_cast<int64_t>(h) * p.sq_pad + stat_row0 : (static_cast<int64_t>(b) * p.hq + h) * p.sq_pad;
  };
  const Mask<Kind> rule = bwd_rule<Kind>(p, len_q(), len_k());
  const BlockRange mr = rule.m_block_range(n_block, kBM, kBN);
  int first_unmasked = 0;
  if constexpr (!kLocal) first_unmasked = rule.first_unmasked_m_block(n_block, kBM, kBN);
  const int n0 = n_block * kBN;

  // This warp's S^T tile (keys s_key0.., queries s_q0.. of the block) and dK / dV tile.
  const int s_key0 = (warp % Cfg::kSdpKeyWarps) * Cfg::kSdpKeys;
  const int s_q0 = (warp / Cfg::kSdpKeyWarps) * Cfg::kSdpQueries;
  const int kv_key0 = (warp % Cfg::kDkvKeyWarps) * Cfg::kDkvKeys;
  const int kv_col0 = (warp / Cfg::kDkvKeyWarps) * Cfg::kDkvCols;
  float rdK[kDkvMT][kNTc][4], rdV[kDkvMT][kNTc][4];
#pragma unroll
  for (int mt = 0; mt < kDkvMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTc; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) rdK[mt][nt][e] = rdV[mt][nt][e] = 0.f;

  if (!mr.empty()) {
    const TileLoader<Cfg, kBN> kv_loader(tid);
    const TileLoader<Cfg, kBM> q_loader(tid);
    const bool qk_cols = kv_loader.chunk_below(p.d), v_cols = kv_loader.chunk_below(p.d_v);
    const Elem* gK = static_cast<const Elem*>(p.k) + batch_off(p.k_sb, p.k_ss, k_row0) +
                     static_cast<int64_t>(n0) * p.k_ss + hk * p.k_sh;
    const Elem* gV = static_cast<const Elem*>(p.v) + batch_off(p.v_sb, p.v_ss, k_row0) +
                     static_cast<int64_t>(n0) * p.v_ss + hk * p.v_sh;
    kv_loader.template load<true>(sK, gK, p.k_ss, len_k() - n0, qk_cols);
    kv_loader.template load<true>(sV, gV, p.v_ss, len_k() - n0, v_cols);
    auto load_q = [&](int stage, int h, int m) {
      const int64_t row0 = static_cast<int64_t>(m) * kBM;
      const Elem* gQ = static_cast<const Elem*>(p.q) + batch_off(p.q_sb, p.q_ss, q_row0) + row0 * p.q_ss + h * p.q_sh;
      const Elem* gDo =
          static_cast<const Elem*>(p.dout) + batch_off(p.do_sb, p.do_ss, q_row0) + row0 * p.do_ss + h * p.do_sh;
      const int rows = len_q() - static_cast<int>(row0);
      if (Cfg::kFullBlockLoads && rows >= kBM) {  // every block but a sequence's last
        q_loader.template load_full<true>(s0 + Cfg::kSmemQ + stage * Cfg::kTileQ, gQ, p.q_ss, qk_cols);
        q_loader.template load_full<true>(s0 + Cfg::kSmemDo + stage * Cfg::kTileQ, gDo, p.do_ss, v_cols);
      } else {
        q_loader.template load<true>(s0 + Cfg::kSmemQ + stage * Cfg::kTileQ, gQ, p.q_ss, rows, qk_cols);
        q_loader.template load<true>(s0 + Cfg::kSmemDo + stage * Cfg::kTileQ, gDo, p.do_ss, rows, v_cols);
      }
      const int64_t stat = stat_base(h) + row0;
      if (tid < kBM / 4) {
        arch::cp_async_cg_16(s0 + Cfg::kSmemLse + stage * Cfg::kStatBytes + tid * 16, p.lse_log2 + stat + tid * 4);
      } else if (tid < kBM / 2) {
        const int t = tid - kBM / 4;
        arch::cp_async_cg_16(s0 + Cfg::kSmemDsum + stage * Cfg::kStatBytes + t * 16, p.dsum + stat + t * 4);
      }
    };

    // ldmatrix lane addressing (warp_gemm.h LaneAddr), kernel.h's patterns: "A" for A operands
    // and transposed B operands, "B" for untransposed B operands and dS's transposed A; over the
    // keys x queries tiles, "A" reads P^T and dS^T as the A of dV and dK.
    const LaneAddr<Cfg> addr_a(0, (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4, lane);
    const LaneAddr<Cfg> addr_b(0, (lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1, lane);
    const LaneAddr<BwdDsShape<Cfg>> addr_pa(0, (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4, lane);
    const LaneAddr<BwdDsShape<Cfg>> addr_ds(0, (lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1, lane);
    constexpr int kDqRT = Cfg::kDqRowTiles, kNTdq = Cfg::kNTdq;
    const int dq_row0 = (warp % Cfg::kDqWarpsM) * kDqRT * 16;
    const int dq_col0 = (warp / Cfg::kDqWarpsM) * Cfg::kDqCols;

    const int h_end = (hk + 1) * p.h_ratio;
    int h = hk * p.h_ratio, m = mr.lo, stage = 0;
    load_q(0, h, m);
    arch::cp_async_commit();
    // Deterministic, without Sm80BwdOptions::release_after_dq: the turn counter thread 0 advances
    // after the next barrier, once every thread's adds are fenced.
    int64_t released = -1;
    int release_to = 0;
#pragma unroll 1
    while (true) {
      int h_next = h, m_next = m + 1;
      if (m_next == mr.hi) {
        m_next = mr.lo;
        ++h_next;
      }
      const bool has_next = h_next < h_end;
      arch::cp_async_wait<0>();
      // Q/dO of this block landed for every thread; every warp is done with the previous block's
      // P^T / dS^T (dK, dV, dQ GEMMs) and Q/dO stage.
      __syncthreads();
      if constexpr (!Cfg::kReleaseAfterDq) {
        if (released >= 0 && tid == 0) {
          cuda::atomic_ref<int, cuda::thread_scope_device>(p.dq_turn[released])
              .store(release_to, cuda::memory_order_release);
        }
        released = -1;
      }
      if constexpr (Cfg::kDoubleBuffer && !Cfg::kLateQLoad) {
        if (has_next) load_q(stage ^ 1, h_next, m_next);
        arch::cp_async_commit();
      }
      const uint32_t sQ = s0 + Cfg::kSmemQ + stage * Cfg::kTileQ;
      const uint32_t sDo = s0 + Cfg::kSmemDo + stage * Cfg::kTileQ;
      const int m0 = m * kBM;
      const float2* lse = reinterpret_cast<const float2*>(smem + Cfg::kSmemLse + stage * Cfg::kStatBytes);
      const float2* dsum = reinterpret_cast<const float2*>(smem + Cfg::kSmemDsum + stage * Cfg::kStatBytes);
      bool need_mask;
      if constexpr (kLocal) need_mask = local_needs_mask<kBM, kBN>(p, len_q(), len_k(), m0, n0);
      else need_mask = m < first_unmasked;

      // 1. This warp's S^T and dP^T, one query slice at a time, to P^T and dS^T in shared memory.
#pragma unroll 1
      for (int q_off = s_q0; q_off < s_q0 + Cfg::kSdpQueries; q_off += Cfg::kSliceQ) {
        float rS[kSdpMT][kNTq][4], rP[kSdpMT][kNTq][4];
#pragma unroll
        for (int mt = 0; mt < kSdpMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNTq; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) rS[mt][nt][e] = rP[mt][nt][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kD / 16; ++ks) {
          uint32_t ak[kSdpMT][4], av[kSdpMT][4];
#pragma unroll
          for (int mt = 0; mt < kSdpMT; ++mt) {
            arch::ldmatrix_x4(ak[mt], addr_a.addr(sK, s_key0 + mt * 16, 2 * ks));
            arch::ldmatrix_x4(av[mt], addr_a.addr(sV, s_key0 + mt * 16, 2 * ks));
          }
#pragma unroll
          for (int np = 0; np < kNTq / 2; ++np) {
            uint32_t bq[4], bd[4];
            arch::ldmatrix_x4(bq, addr_b.addr(sQ, q_off + np * 16, 2 * ks));
            arch::ldmatrix_x4(bd, addr_b.addr(sDo, q_off + np * 16, 2 * ks));
            const uint32_t q0[2] = {bq[0], bq[1]}, q1[2] = {bq[2], bq[3]};
            const uint32_t d0[2] = {bd[0], bd[1]}, d1[2] = {bd[2], bd[3]};
#pragma unroll
            for (int mt = 0; mt < kSdpMT; ++mt) {
              arch::mma_m16n8k16_f32<kBf16>(rS[mt][2 * np], ak[mt], q0);
              arch::mma_m16n8k16_f32<kBf16>(rS[mt][2 * np + 1], ak[mt], q1);
              arch::mma_m16n8k16_f32<kBf16>(rP[mt][2 * np], av[mt], d0);
              arch::mma_m16n8k16_f32<kBf16>(rP[mt][2 * np + 1], av[mt], d1);
            }
          }
        }
        // kLateQLoad: the next block's Q / dO / lse / dsum load issued after the first slice's
        // GEMMs instead of right after the barrier, so the loop top starts with LDSM / MMA
        // (FlashAttention-2 issues its next Q there) and the load still has the rest of the block.
        if constexpr (Cfg::kDoubleBuffer && Cfg::kLateQLoad) {
          if (q_off == s_q0) {
            if (has_next) load_q(stage ^ 1, h_next, m_next);
            arch::cp_async_commit();
          }
        }
        // kStatRegs: this slice's lse / dsum pairs read once, not per m16 tile: the P^T / dS^T
        // stores between the tiles may alias them for the compiler, which then reloads them.
        float2 stat_l[Cfg::kStatRegs ? kNTq : 1], stat_d[Cfg::kStatRegs ? kNTq : 1];
        if constexpr (Cfg::kStatRegs && !kLocal) {
#pragma unroll
          for (int nt = 0; nt < kNTq; ++nt) {
            const int i2 = (q_off / 8 + nt) * 4 + (lane & 3);
            stat_l[nt] = lse[i2];
            stat_d[nt] = dsum[i2];
          }
        } else {
          (void)stat_l;
          (void)stat_d;
        }
#pragma unroll
        for (int mt = 0; mt < kSdpMT; ++mt) {
          // P^T = exp2(S^T scale_log2 - lse_log2) (0 where the rule hides the pair), dS^T = P^T
          // (dP^T - dsum); element (nt, e) is key key_r + 8 (e >> 1), query m0 + q_off + 8 nt +
          // 2 (lane % 4) + (e & 1).
          const int key_r = n0 + s_key0 + mt * 16 + (lane >> 2);
          if constexpr (!kLocal) {
            // masked (a std::bool_constant): this copy applies the causal / key-length mask.
            auto scores = [&](auto masked) {
#pragma unroll
              for (int nt = 0; nt < kNTq; ++nt) {
                const int i2 = (q_off / 8 + nt) * 4 + (lane & 3);
                const float2 l = Cfg::kStatRegs ? stat_l[nt] : lse[i2], ds = Cfg::kStatRegs ? stat_d[nt] : dsum[i2];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  float pv = arch::ex2_approx_ftz(fmaf(rS[mt][nt][e], p.scale_log2, -((e & 1) ? l.y : l.x)));
                  if (decltype(masked)::value || (!Cfg::kMaskBranch && need_mask)) {
                    const int key = key_r + 8 * (e >> 1);
                    const int query = m0 + q_off + nt * 8 + 2 * (lane & 3) + (e & 1);
                    if (!(key < len_k() && (!kCausal || key <= query + (len_k() - len_q())))) pv = 0.f;
                  }
                  rS[mt][nt][e] = pv;
                  rP[mt][nt][e] = pv * (rP[mt][nt][e] - ((e & 1) ? ds.y : ds.x));
                }
              }
            };
            // kMaskBranch: one copy of the pass per case behind the block-uniform need_mask;
            // otherwise one copy whose mask instructions are predicated on it (they still issue).
            if (Cfg::kMaskBranch && need_mask) scores(std::true_type{});
            else scores(std::false_type{});
          } else {
            // Softcap and ALiBi are run-time switches; kWindowOnlyPass: a call with neither takes
            // a copy of the pass without their per-score work.
            if (!Cfg::kWindowOnlyPass || p.softcap_scale > 0.f || p.alibi != nullptr)
              local_scores<kNTq, true>(rS[mt], rP[mt], lse, dsum, p, len_q(), len_k(), b, h, m0 + q_off, key_r,
                                       q_off / 8, lane, need_mask);
            else if constexpr (Cfg::kWindowOnlyPass)
              local_scores<kNTq, false>(rS[mt], rP[mt], lse, dsum, p, len_q(), len_k(), b, h, m0 + q_off, key_r,
                                        q_off / 8, lane, need_mask);
          }
          constexpr int kRowBytes = kBM * 2;
#pragma unroll
          for (int nt = 0; nt < kNTq; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int row = s_key0 + mt * 16 + (lane >> 2) + 8 * hh;
              const uint32_t off = swz::chunk_offset<kRowBytes, Cfg::kSwizzle>(row, q_off / 8 + nt) + 4 * (lane & 3);
              *reinterpret_cast<uint32_t*>(smem + Cfg::kSmemP + off) =
                  arch::pack_f32x2<kBf16>(rS[mt][nt][2 * hh], rS[mt][nt][2 * hh + 1]);
              *reinterpret_cast<uint32_t*>(smem + Cfg::kSmemDs + off) =
                  arch::pack_f32x2<kBf16>(rP[mt][nt][2 * hh], rP[mt][nt][2 * hh + 1]);
            }
        }
      }
      __syncthreads();  // P^T and dS^T complete

      // 2. dV += P^T dO, dK += dS^T Q over the block's queries (B operands transposed); under
      // kDqFirst after 3 (the copy below), so the dK / dV MMAs issue while dQ's reductions drain;
      // under kDqMid dV here and dK there (FlashAttention-2's order: dV, dQ, dK).
      if constexpr (!Cfg::kDqFirst) {
#pragma unroll
        for (int kq = 0; kq < kBM / 16; ++kq) {
          uint32_t aP[kDkvMT][4], aDs[kDkvMT][4];
#pragma unroll
          for (int mt = 0; mt < kDkvMT; ++mt) {
            arch::ldmatrix_x4(aP[mt], addr_pa.addr(sPt, kv_key0 + mt * 16, 2 * kq));
            if constexpr (!Cfg::kDqMid) arch::ldmatrix_x4(aDs[mt], addr_pa.addr(sDs, kv_key0 + mt * 16, 2 * kq));
          }
#pragma unroll
          for (int np = 0; np < kNTc / 2; ++np) {
            uint32_t bd[4], bq[4];
            arch::ldmatrix_x4_trans(bd, addr_a.addr(sDo, kq * 16, kv_col0 / 8 + 2 * np));
            if constexpr (!Cfg::kDqMid) arch::ldmatrix_x4_trans(bq, addr_a.addr(sQ, kq * 16, kv_col0 / 8 + 2 * np));
            const uint32_t d0[2] = {bd[0], bd[1]}, d1[2] = {bd[2], bd[3]};
#pragma unroll
            for (int mt = 0; mt < kDkvMT; ++mt) {
              arch::mma_m16n8k16_f32<kBf16>(rdV[mt][2 * np], aP[mt], d0);
              arch::mma_m16n8k16_f32<kBf16>(rdV[mt][2 * np + 1], aP[mt], d1);
              if constexpr (!Cfg::kDqMid) {
                const uint32_t q0[2] = {bq[0], bq[1]}, q1[2] = {bq[2], bq[3]};
                arch::mma_m16n8k16_f32<kBf16>(rdK[mt][2 * np], aDs[mt], q0);
                arch::mma_m16n8k16_f32<kBf16>(rdK[mt][2 * np + 1], aDs[mt], q1);
              }
            }
          }
        }
      }

      // Deterministic: wait for this block's turn in query block m's order of additions.
      const int64_t chunk = (static_cast<int64_t>(b) * p.hq + h) * p.num_m_blocks + m;
      int turn = n_block;
      if (deterministic) {
        if constexpr (kCausal) turn = rule.n_block_range(m, kBM, kBN).hi - 1 - n_block;
        if constexpr (kLocal) {
          const int first = m0 + (len_k() - len_q()) - p.window_left;
          turn = n_block - min(max(first, 0), len_k()) / kBN;
        }
        if (tid == 0) {
          cuda::atomic_ref<int, cuda::thread_scope_device> t(p.dq_turn[chunk]);
          while (t.load(cuda::memory_order_acquire) != turn) {
          }
        }
      }
      if (!Cfg::kDoubleBuffer || deterministic) {
        __syncthreads();  // every warp done with this stage's Q / dO; the turn is ours
        if constexpr (!Cfg::kDoubleBuffer) {
          if (has_next) load_q(0, h_next, m_next);  // under the dQ GEMM
          arch::cp_async_commit();
        }
      }

      // 3. dQ (this warp's rows and columns) = dS K over the block's keys, into the accumulator,
      // kDqPasses column passes.
#pragma unroll 1
      for (int dq_c0 = dq_col0; dq_c0 < dq_col0 + Cfg::kDqCols; dq_c0 += Cfg::kDqCols / Cfg::kDqPasses) {
        float rdQ[kDqRT][kNTdq][4];
#pragma unroll
        for (int rt = 0; rt < kDqRT; ++rt)
#pragma unroll
          for (int nt = 0; nt < kNTdq; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) rdQ[rt][nt][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kBN / 16; ++ks) {
          uint32_t ads[kDqRT][4];
#pragma unroll
          for (int rt = 0; rt < kDqRT; ++rt) arch::ldmatrix_x4_trans(ads[rt], addr_ds.addr(sDs, ks * 16, (dq_row0 + rt * 16) / 8));
#pragma unroll
          for (int np = 0; np < kNTdq / 2; ++np) {
            uint32_t bk[4];
            arch::ldmatrix_x4_trans(bk, addr_a.addr(sK, ks * 16, dq_c0 / 8 + 2 * np));
            const uint32_t k0[2] = {bk[0], bk[1]}, k1[2] = {bk[2], bk[3]};
#pragma unroll
            for (int rt = 0; rt < kDqRT; ++rt) {
              arch::mma_m16n8k16_f32<kBf16>(rdQ[rt][2 * np], ads[rt], k0);
              arch::mma_m16n8k16_f32<kBf16>(rdQ[rt][2 * np + 1], ads[rt], k1);
            }
          }
        }
        if constexpr (kRedLanePtr) {
          // One lane pointer and compile-time offsets, no per-row test: rows past len_q lie in
          // the scratch's padded query blocks (sq_pad, kernel_args.h), which the postprocess
          // never reads, so their adds may land. kDqFragOrder: the block's accumulator in the
          // warps' order (config.h dq_frag_offset): this warp's tile, this pass's instructions,
          // 32 lanes x 2 floats each.
          // kDqRedV4: one red.v4 per pair of n8 tiles, 4 floats a lane.
          constexpr int kPassFloats = kDqRT * 2 * kNTdq * 64, kVec = Cfg::kDqVec;
          float* lane_acc =
              Cfg::kDqFragOrder
                  ? p.dq_accum + (stat_base(h) + m0) * kD + warp * (Cfg::kDqWarpRows * Cfg::kDqCols) +
                        (dq_c0 - dq_col0) / (Cfg::kDqCols / Cfg::kDqPasses) * kPassFloats + 2 * kVec * lane
                  : p.dq_accum + (stat_base(h) + m0 + dq_row0 + (lane >> 2)) * kD + dq_c0 + 2 * (lane & 3);
#pragma unroll
          for (int rt = 0; rt < kDqRT; ++rt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
#pragma unroll
              for (int nt = 0; nt < kNTdq; nt += kVec) {
                float* dst = lane_acc + (Cfg::kDqFragOrder ? ((rt * 2 + hh) * kNTdq + nt) * 64
                                                           : (rt * 16 + 8 * hh) * kD + nt * 8);
                if constexpr (Cfg::kDqRedV4)
                  arch::red_add_f32x4(dst, rdQ[rt][nt][2 * hh], rdQ[rt][nt][2 * hh + 1], rdQ[rt][nt + 1][2 * hh],
                                      rdQ[rt][nt + 1][2 * hh + 1]);
                else
                  arch::red_add_f32x2(dst, rdQ[rt][nt][2 * hh], rdQ[rt][nt][2 * hh + 1]);
              }
        } else {
          float* acc = p.dq_accum + (stat_base(h) + m0) * kD;
#pragma unroll
          for (int rt = 0; rt < kDqRT; ++rt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int row = dq_row0 + rt * 16 + (lane >> 2) + 8 * hh;
              if (m0 + row >= len_q()) continue;  // padding rows: their dS is 0
#pragma unroll
              for (int nt = 0; nt < kNTdq; ++nt) {
                float* dst = acc + row * kD + dq_c0 + nt * 8 + 2 * (lane & 3);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
                if constexpr (kRedDq) {
                  arch::red_add_f32x2(dst, rdQ[rt][nt][2 * hh], rdQ[rt][nt][2 * hh + 1]);
                  continue;
                } else if constexpr (Cfg::kVectorAtomics) {
                  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(rdQ[rt][nt][2 * hh], rdQ[rt][nt][2 * hh + 1]));
                  continue;
                }
#endif
                atomicAdd(dst, rdQ[rt][nt][2 * hh]);
                atomicAdd(dst + 1, rdQ[rt][nt][2 * hh + 1]);
              }
            }
        }
      }
      if (deterministic) {
        __threadfence();  // this thread's additions before thread 0's release
        if constexpr (Cfg::kReleaseAfterDq) {
          __syncthreads();
          if (tid == 0) {
            cuda::atomic_ref<int, cuda::thread_scope_device>(p.dq_turn[chunk])
                .store(turn + 1, cuda::memory_order_release);
          }
        } else {
          released = chunk;
          release_to = turn + 1;
        }
      }
      // 2 after 3 under kDqFirst (dK alone under kDqMid): the code above, written twice rather
      // than as one lambda called in either place, which renumbered the default kernels'
      // accumulators (PTX not identical).
      if constexpr (Cfg::kDqFirst || Cfg::kDqMid) {
#pragma unroll
        for (int kq = 0; kq < kBM / 16; ++kq) {
          uint32_t aP[kDkvMT][4], aDs[kDkvMT][4];
#pragma unroll
          for (int mt = 0; mt < kDkvMT; ++mt) {
            if constexpr (!Cfg::kDqMid) arch::ldmatrix_x4(aP[mt], addr_pa.addr(sPt, kv_key0 + mt * 16, 2 * kq));
            arch::ldmatrix_x4(aDs[mt], addr_pa.addr(sDs, kv_key0 + mt * 16, 2 * kq));
          }
#pragma unroll
          for (int np = 0; np < kNTc / 2; ++np) {
            uint32_t bd[4], bq[4];
            if constexpr (!Cfg::kDqMid) arch::ldmatrix_x4_trans(bd, addr_a.addr(sDo, kq * 16, kv_col0 / 8 + 2 * np));
            arch::ldmatrix_x4_trans(bq, addr_a.addr(sQ, kq * 16, kv_col0 / 8 + 2 * np));
            const uint32_t q0[2] = {bq[0], bq[1]}, q1[2] = {bq[2], bq[3]};
#pragma unroll
            for (int mt = 0; mt < kDkvMT; ++mt) {
              if constexpr (!Cfg::kDqMid) {
                const uint32_t d0[2] = {bd[0], bd[1]}, d1[2] = {bd[2], bd[3]};
                arch::mma_m16n8k16_f32<kBf16>(rdV[mt][2 * np], aP[mt], d0);
                arch::mma_m16n8k16_f32<kBf16>(rdV[mt][2 * np + 1], aP[mt], d1);
              }
              arch::mma_m16n8k16_f32<kBf16>(rdK[mt][2 * np], aDs[mt], q0);
              arch::mma_m16n8k16_f32<kBf16>(rdK[mt][2 * np + 1], aDs[mt], q1);
            }
          }
        }
      }
      if (!has_next) break;
      h = h_next;
      m = m_next;
      if constexpr (Cfg::kDoubleBuffer) stage ^= 1;
    }
    if (!Cfg::kReleaseAfterDq && deterministic) {
      __syncthreads();
      if (tid == 0) {
        cuda::atomic_ref<int, cuda::thread_scope_device>(p.dq_turn[released]).store(release_to, cuda::memory_order_release);
      }
    }
  }

  // dK = scale dS^T Q and dV, rows below sk and columns below d / d_v (a key no query sees: 0).
  Elem* dk = static_cast<Elem*>(p.dk) + batch_off(p.dk_sb, p.dk_ss, k_row0) + hk * p.dk_sh;
  Elem* dv = static_cast<Elem*>(p.dv) + batch_off(p.dv_sb, p.dv_ss, k_row0) + hk * p.dv_sh;
  if constexpr (Cfg::kSmemEpilogue) {
    // Fragments into the K / V tiles' space (same swizzled rows), then 16-B chunks out.
    constexpr int kRowBytes = kD * 2;
    arch::cp_async_wait<0>();
    __syncthreads();  // every warp done with K and V
#pragma unroll
    for (int mt = 0; mt < kDkvMT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = kv_key0 + mt * 16 + (lane >> 2) + 8 * hh;
#pragma unroll
        for (int nt = 0; nt < kNTc; ++nt) {
          const uint32_t off =
              swz::chunk_offset<kRowBytes, Cfg::kSwizzle>(row, kv_col0 / 8 + nt) + 4 * (lane & 3);
          *reinterpret_cast<uint32_t*>(smem + Cfg::kSmemK + off) =
              arch::pack_f32x2<kBf16>(rdK[mt][nt][2 * hh] * p.scale, rdK[mt][nt][2 * hh + 1] * p.scale);
          *reinterpret_cast<uint32_t*>(smem + Cfg::kSmemV + off) =
              arch::pack_f32x2<kBf16>(rdV[mt][nt][2 * hh], rdV[mt][nt][2 * hh + 1]);
        }
      }
    __syncthreads();
    constexpr int kChunks = Cfg::kChunksPerRow;
#pragma unroll 1
    for (int i = tid; i < kBN * kChunks; i += Cfg::kThreads) {
      const int row = i / kChunks, ch = i % kChunks, key = n0 + row;
      if (key >= len_k()) break;  // i grows with row: every later chunk is past the keys too
      const uint32_t off = swz::chunk_offset<kRowBytes, Cfg::kSwizzle>(row, ch);
      if (ch * 8 < p.d)
        *reinterpret_cast<uint4*>(dk + key * p.dk_ss + ch * 8) = *reinterpret_cast<const uint4*>(smem + Cfg::kSmemK + off);
      if (ch * 8 < p.d_v)
        *reinterpret_cast<uint4*>(dv + key * p.dv_ss + ch * 8) = *reinterpret_cast<const uint4*>(smem + Cfg::kSmemV + off);
    }
  } else {
#pragma unroll
    for (int mt = 0; mt < kDkvMT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int key = n0 + kv_key0 + mt * 16 + (lane >> 2) + 8 * hh;
        if (key >= len_k()) continue;
#pragma unroll
        for (int nt = 0; nt < kNTc; ++nt) {
          const int col = kv_col0 + nt * 8 + 2 * (lane & 3);
          if (col < p.d) {
            *reinterpret_cast<uint32_t*>(dk + key * p.dk_ss + col) =
                arch::pack_f32x2<kBf16>(rdK[mt][nt][2 * hh] * p.scale, rdK[mt][nt][2 * hh + 1] * p.scale);
          }
          if (col < p.d_v) {
            *reinterpret_cast<uint32_t*>(dv + key * p.dv_ss + col) =
                arch::pack_f32x2<kBf16>(rdV[mt][nt][2 * hh], rdV[mt][nt][2 * hh + 1]);
          }
        }
      }
  }
}

}  // namespace flashattn::sm80
