// The sm80 forward kernel (FlashAttention-2 structure): one CTA per (BlockM query rows, q head,
// batch); warps split the rows; K/V tiles stream through shared memory with cp.async, walked
// from the last key block to the first so the masked blocks come first. With a padded Cfg
// (Sm80FwdPadded, fwd/config.h) it serves head dims d, d_v below Cfg::kHeadDim; with a varlen
// one (Sm80FwdVarlen) packed variable-length batches, batch = sequence; with a feature one
// (Sm80FwdFeature) windows, softcap and ALiBi, over a varlen one per sequence.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "arch/convert.h"
#include "arch/cp_async.h"
#include "arch/fast_math.h"
#include "arch/ldmatrix.h"
#include "common/mask.h"
#include "common/params.h"
#include "sm80/fwd/col_split.h"
#include "sm80/fwd/epilogue.h"
#include "sm80/fwd/kernel_args.h"
#include "sm80/fwd/softmax.h"
#include "sm80/mask.h"
#include "sm80/smem_tile.h"
#include "sm80/varlen.h"
#include "sm80/warp_gemm.h"

namespace flashattn::sm80 {


// One sequence of a packed (varlen) batch, clamped so that no offset can move an access outside
// the tensors (sm80/varlen.h): its first q / k row in [0, total], its lengths in [0, max length]
// and first row + length <= total (a bad offset shortens or empties the sequence instead).
struct VarlenSeq {
  int64_t q0, k0;  // first row in the packed q / o (k / v)
  int len_q, len_k;
};

__device__ __forceinline__ VarlenSeq varlen_sequence(const Sm80FwdVarlenArgs& p, int i) {
  VarlenSeq s;
  s.len_q = varlen_rows(p.cu_q, i, p.total_q, p.sq, s.q0);
  s.len_k = varlen_rows(p.cu_k, i, p.total_k, p.sk, s.k0);
  return s;
}

// Kind: the mask, compile-time (a non-causal kernel carries no causal code). Cfg::kVarlen: a
// packed batch (Sm80FwdVarlen, fwd/config.h), one sequence per blockIdx.z. Cfg::kFeature: a
// window, softcap and ALiBi (Sm80FwdFeature), always with the kLocal mask; both: the window
// bottom-right in each sequence's own lengths, ALiBi's slopes and distances the sequence's.
// One CTA's work, p the kernel's parameter block (Sm80FwdParamsOf<Cfg>): the body of both
// kernels below.
template <class Cfg, class Elem, MaskKind Kind, class Args>
__device__ __forceinline__ void sm80_fwd_block(const Args& p) {
  static_assert(std::is_same_v<Args, Sm80FwdParamsOf<Cfg>>, "the configuration's parameter block");
  constexpr bool kBf16 = std::is_same_v<Elem, __nv_bfloat16>;
  constexpr bool kLocal = Kind == MaskKind::kLocal;
  static_assert(kLocal == Cfg::kFeature, "the window lives in the feature kernels' parameters");
  constexpr int kBM = Cfg::kBlockM, kBN = Cfg::kBlockN, kMT = Cfg::kMTiles;
  constexpr int kNS = Cfg::kNTilesS, kNO = Cfg::kNTilesO;
  // 128-B alignment is load-bearing: PrecomputedSwizzle XORs address bits 4..6 (swizzle.h).
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = arch::smem_u32(smem);
  const uint32_t sK = sQ + Cfg::kSmemQ;
  const uint32_t sV = sK + Cfg::kSmemK;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Heaviest (causal) row blocks first.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / p.h_ratio;
  const int m0 = m_block * kBM;
  // o_col_split (fwd/col_split.h): a pair of warps owns the rows; the warp's half its keys of S.
  const int warp_row0 = (Cfg::kColSplit ? warp >> 1 : warp) * Cfg::kWarpRows;
  const int warp_key0 = Cfg::kColSplit ? (warp & 1) * (kBN / 2) : 0;

  // The lengths the mask and the loads see: the call's (dense) or the sequence's (varlen), and
  // the tensors from row 0 of this block (q, o), of this batch or sequence (k, v).
  // (Dense: assigned below in the order the kernel always had, so its PTX stays the same.)
  int seq_q, seq_k;
  const Elem *gQ, *gK, *gV;
  Elem* gO;
  float* gLse;
  // Varlen: o / lse of this block from the sequence's first q row, computed where they are
  // written (from a second read of cu_q) rather than held in registers through the main loop.
  [[maybe_unused]] auto varlen_out = [&] {
    if constexpr (Cfg::kVarlen) {
      const int64_t q0 = varlen_sequence(p, batch).q0 + m0;
      gO = static_cast<Elem*>(p.o) + q0 * p.o_ss + head * p.o_sh;
      gLse = p.lse ? p.lse + static_cast<int64_t>(head) * p.total_q + q0 : nullptr;
    }
  };
  if constexpr (Cfg::kVarlen) {
    // Packed rows: batch strides unused; a sequence's rows past its length belong to the next
    // one, so every tile load below predicates rows on seq_q / seq_k (zero-fill, no read).
    const VarlenSeq seq = varlen_sequence(p, batch);
    if (m0 >= seq.len_q) return;  // past this sequence's queries (also: a zero-length one)
    seq_q = seq.len_q;
    seq_k = seq.len_k;
    if (tid == 0) *reinterpret_cast<int2*>(smem + Cfg::kSmemLengths) = make_int2(seq_q, seq_k);
    __syncthreads();  // the main loop reads the lengths from there (lengths() below)
    gQ = static_cast<const Elem*>(p.q) + (seq.q0 + m0) * p.q_ss + head * p.q_sh;
    gK = static_cast<const Elem*>(p.k) + seq.k0 * p.k_ss + kv_head * p.k_sh;
    gV = static_cast<const Elem*>(p.v) + seq.k0 * p.v_ss + kv_head * p.v_sh;
  } else {
    gQ = static_cast<const Elem*>(p.q) + batch * p.q_sb + m0 * p.q_ss + head * p.q_sh;
    gK = static_cast<const Elem*>(p.k) + batch * p.k_sb + kv_head * p.k_sh;
    gV = static_cast<const Elem*>(p.v) + batch * p.v_sb + kv_head * p.v_sh;
    gO = static_cast<Elem*>(p.o) + batch * p.o_sb + m0 * p.o_ss + head * p.o_sh;
    gLse = p.lse ? p.lse + (static_cast<int64_t>(batch) * p.hq + head) * p.sq + m0 : nullptr;
    seq_q = p.sq;
    seq_k = p.sk;
  }
  const int rows_valid = min(kBM, seq_q - m0);

  // Key blocks [0, n_end) hold every key some row of this block sees (kLocal: [local.lo, n_end)).
  Mask<Kind> mask{seq_q, seq_k};
  if constexpr (kLocal) {
    mask.left = p.window_left;
    mask.right = p.window_right;
  }
  // The mask (its lengths) as the main loop sees it: dense, the one above (the call's lengths,
  // parameters); varlen, the sequence's lengths reloaded from shared memory at each use (the
  // cp.async and barrier asm between uses clobber memory, so nothing holds them in registers).
  auto lengths = [&]() -> Mask<Kind> {
    if constexpr (Cfg::kVarlen && kLocal) {
      // The call's window (its sides bounded by the max lengths: still exact for this sequence,
      // fwd/kernel_args.h set_feature_fields) over the sequence's lengths.
      const int2 l = *reinterpret_cast<const int2*>(smem + Cfg::kSmemLengths);
      Mask<Kind> m{l.x, l.y};
      m.left = p.window_left;
      m.right = p.window_right;
      return m;
    } else if constexpr (Cfg::kVarlen) {
      const int2 l = *reinterpret_cast<const int2*>(smem + Cfg::kSmemLengths);
      return {l.x, l.y};
    } else {
      return mask;
    }
  };
  // The key count the K/V loads predicate rows on (dense: the parameter itself).
  auto keys = [&]() -> int {
    if constexpr (Cfg::kVarlen) {
      return lengths().sk;
    } else {
      return p.sk;
    }
  };
  // kLocal: the window's blocks [local.lo, n_end), of which local.unmasked need no element-wise
  // mask (the 64-bit rule once per block; the masked iterations use 32-bit forms).
  int n_end;
  [[maybe_unused]] LocalBlocks local{};
  if constexpr (kLocal) {
    const BlockRange r = mask.n_block_range(m_block, kBM, kBN);
    n_end = r.hi;
    local = {r.lo, mask.unmasked_n_block_range(m_block, kBM, kBN)};
  } else {
    n_end = n_block_end32(mask, m0, rows_valid, kBN);
  }
  Epilogue<Cfg, Elem> epi{smem, warp_row0, lane};
  if constexpr (Cfg::kColSplit) epi.half = warp & 1;
  bool no_keys;
  if constexpr (kLocal) {
    no_keys = n_end <= local.lo;
  } else {
    no_keys = n_end == 0;
  }
  if (no_keys) {  // every row of this block is fully masked
    if constexpr (Cfg::kVarlen) varlen_out();
    epi.write_empty(gO, p.o_ss, gLse, rows_valid, p.d_v);
    return;
  }

  const TileLoader<Cfg, kBM> q_loader(tid);
  const TileLoader<Cfg, kBN> kv_loader(tid);
  // Padded kernels (Cfg::kPadded): does this thread's 16-B chunk of a Q/K row (of a V row) lie
  // below d (d_v)? The chunk depends on tid only, the same in both loaders. Where it does not:
  //  - Q and K: its loads zero-fill (src-size 0), so the padded columns add exact zeros to S;
  //  - V (StridedLoads): it loads its row's chunk 0 instead, an address inside the caller's row.
  //    Those columns of V meet only O's columns at or past d_v (each column of P V is its own),
  //    which the epilogue never stores. Copying a real chunk costs nothing in the main loop; a
  //    src-size operand for V as well (or zeroing V's slots once and skipping their loads) made
  //    the register-bound padded shapes spill (d64 64x64 and 128x128, d128 128x64: 8-56 B with
  //    CUDA 13.0). Nothing past a row's d or d_v is read.
  [[maybe_unused]] bool qk_cols = true, v_cols = true;
  if constexpr (Cfg::kPadded) {
    qk_cols = kv_loader.chunk_below(p.d);
    v_cols = kv_loader.chunk_below(p.d_v);
  }
  const WarpGemm<Cfg> gemm = [&] {
    if constexpr (Cfg::kColSplit) {
      return WarpGemm<Cfg>(sQ, sK, sV, warp_row0, lane, warp & 1);
    } else {
      return WarpGemm<Cfg>(sQ, sK, sV, warp_row0, lane);
    }
  }();
  [[maybe_unused]] const std::conditional_t<Cfg::kColSplit, WarpPair<Cfg>, NoWarpPair> pair(smem, warp, lane);

  float rO[kMT][kNO][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNO; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) rO[mt][nt][e] = 0.f;
  OnlineSoftmax<Cfg> softmax;
  uint32_t rQres[Cfg::kQInRegs ? Cfg::kKStepsQK : 1][kMT][4];

  // K/V tile loads, always in the order n_end-1, n_end-2, ... (each of K and V).
  // kFull: tile n is known to be full (n < the last key block), so no row predicates.
  // StridedLoads: k_src / v_src sit at pass 0 of the last tile loaded (initially of tile n_end).
  uint64_t k_src = 0, v_src = 0, k_pass = 0, v_pass = 0;
  uint32_t kv_off = 0;
  if constexpr (Cfg::kStridedLoads) {
    constexpr int64_t kPassRows = TileLoader<Cfg, kBN>::kRowsPerPass;
    k_pass = static_cast<uint64_t>(kPassRows * p.k_ss * static_cast<int64_t>(sizeof(Elem)));
    v_pass = static_cast<uint64_t>(kPassRows * p.v_ss * static_cast<int64_t>(sizeof(Elem)));
    const uint64_t tiles = static_cast<uint64_t>(n_end) * (kBN / kPassRows);
    if constexpr (Cfg::kPadded) {  // padded chunks point at chunk 0 of their row (see above)
      k_src = kv_loader.thread_src(gK, p.k_ss, qk_cols) + tiles * k_pass;
      v_src = kv_loader.thread_src(gV, p.v_ss, v_cols) + tiles * v_pass;
    } else {
      k_src = kv_loader.thread_src(gK, p.k_ss) + tiles * k_pass;
      v_src = kv_loader.thread_src(gV, p.v_ss) + tiles * v_pass;
    }
    kv_off = kv_loader.first_offset();
  }
  // Key block n of K or V (g, ss: its tensor; src, pass: its running pointer) into s_dst.
  // zero_cols_tag true (padded kernels, K): this thread's chunk is zero-filled unless `cols` (it
  // lies inside the head dim). V's strided loads take no column predicate (see above); without
  // StridedLoads (an ablation) padded kernels zero-fill both.
  auto load_kv = [&](uint32_t s_dst, const Elem* g, int64_t ss, uint64_t& src, uint64_t pass, int n, auto full_tag,
                     bool cols, auto zero_cols_tag) {
    if constexpr (Cfg::kStridedLoads) {
      kv_loader.template load_strided<!decltype(full_tag)::value, decltype(zero_cols_tag)::value>(
          s_dst, kv_off, src, pass, keys() - n * kBN, g, cols);
    } else {
      kv_loader.template load<Cfg::kPadded>(s_dst, g + static_cast<int64_t>(n) * kBN * ss, ss, keys() - n * kBN, cols);
    }
    arch::cp_async_commit();
  };
  // The g of load_kv: the tile origin, or under StridedLoads only the address zero-filled rows
  // name (any mapped one). Varlen strided kernels name the tensor's base pointer there, a kernel
  // parameter, so no register holds the sequence's origin through the main loop.
  [[maybe_unused]] const Elem* gK_tiles = gK;
  [[maybe_unused]] const Elem* gV_tiles = gV;
  if constexpr (Cfg::kVarlen && Cfg::kStridedLoads) {
    gK_tiles = static_cast<const Elem*>(p.k);
    gV_tiles = static_cast<const Elem*>(p.v);
  }
  // (Only padded kernels name qk_cols / v_cols here: capturing them changes the unpadded
  // kernels' PTX.)
  auto load_k = [&](int n, auto full_tag) {
    if constexpr (Cfg::kVarlen) {
      load_kv(sK, gK_tiles, p.k_ss, k_src, k_pass, n, full_tag, qk_cols, std::bool_constant<Cfg::kPadded>{});
    } else if constexpr (Cfg::kPadded) {
      load_kv(sK, gK, p.k_ss, k_src, k_pass, n, full_tag, qk_cols, std::true_type{});
    } else {
      load_kv(sK, gK, p.k_ss, k_src, k_pass, n, full_tag, true, std::false_type{});
    }
  };
  auto load_v = [&](int n, auto full_tag) {
    if constexpr (Cfg::kVarlen) {
      load_kv(sV, gV_tiles, p.v_ss, v_src, v_pass, n, full_tag, v_cols, std::false_type{});
    } else if constexpr (Cfg::kPadded) {
      load_kv(sV, gV, p.v_ss, v_src, v_pass, n, full_tag, v_cols, std::false_type{});
    } else {
      load_kv(sV, gV, p.v_ss, v_src, v_pass, n, full_tag, true, std::false_type{});
    }
  };

  q_loader.template load<Cfg::kPadded>(sQ, gQ, p.q_ss, rows_valid, qk_cols);
  arch::cp_async_commit();
  if constexpr (Cfg::kEagerKV) load_k(n_end - 1, std::false_type{});
  if constexpr (Cfg::kQInRegs) {
    arch::cp_async_wait<Cfg::kEagerKV ? 1 : 0>();
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < Cfg::kKStepsQK; ++ks) gemm.load_q(rQres[ks], sQ, ks);
  }

  // Feature kernels: ALiBi's slope in the units of the scores the softmax takes (its exp2
  // multiplies them by scale_log2, while the bias is in natural-log units); 0: no ALiBi.
  [[maybe_unused]] float alibi_coef = 0.f;
  if constexpr (Cfg::kFeature) {
    if (p.alibi != nullptr) alibi_coef = -p.alibi[batch * p.alibi_bstride + head] * detail::kLog2e / p.scale_log2;
  }
  // ALiBi's diagonal offset sk - sq: the call's (dense), the sequence's (varlen, its lengths read
  // from shared memory like the mask's).
  [[maybe_unused]] auto diag_offset = [&]() -> int {
    if constexpr (Cfg::kVarlen) {
      const Mask<Kind> l = lengths();
      return l.sk - l.sq;
    } else {
      return p.sk - p.sq;
    }
  };
  // Softcap and ALiBi on the scores of key block n, before the mask (both warp-uniform switches).
  [[maybe_unused]] auto modify_scores = [&](float(&rS)[kMT][kNS][4], int n) {
    if constexpr (Cfg::kFeature) {
      if (p.softcap_scale != 0.f) {
        const float c = fabsf(p.softcap_scale);  // negative: the bounded-max softmax (below)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) rS[mt][nt][e] = arch::tanh_approx(rS[mt][nt][e] * c);
      }
      if (alibi_coef != 0.f) {
        // + coef * |i + sk - sq - j|, the distance from the query's diagonal: one conversion per
        // block (this lane's first element), then per score an FADD of a constant and an FFMA on
        // its absolute value (exact while distances stay below 2^24).
        const float diag0 =
            static_cast<float>(m0 + warp_row0 + (lane >> 2) + diag_offset() - (n * kBN + warp_key0 + 2 * (lane & 3)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float dist = diag0 + static_cast<float>(16 * mt + 8 * (e >> 1) - 8 * nt - (e & 1));
              rS[mt][nt][e] = fmaf(alibi_coef, fabsf(dist), rS[mt][nt][e]);
            }
      }
    }
  };

  // One key block. kMask: this block needs the element-wise mask. Only masked blocks
  // can be the partial last key block, so only their loads of block n take row predicates;
  // block n-1 (below the last) is always full.
  auto iteration = [&](int n, auto mask_tag) {
    constexpr bool kMask = decltype(mask_tag)::value;
    constexpr std::integral_constant<bool, !kMask> kFullN{};
    float rS[kMT][kNS][4];
    if constexpr (Cfg::kEagerKV) {
      arch::cp_async_wait<0>();  // K(n) (and Q) landed; V(n+1) was consumed last iteration
      __syncthreads();
      load_v(n, kFullN);
      gemm.template qk<kBf16>(rS, sQ, sK, rQres);
      arch::cp_async_wait<0>();  // V(n) landed; every warp is done with K(n)
      __syncthreads();
      bool more;  // key block n - 1 is walked next
      if constexpr (kLocal) {
        more = n > local.lo;
      } else {
        more = n > 0;
      }
      if (more) load_k(n - 1, std::true_type{});
    } else {
      load_k(n, kFullN);
      arch::cp_async_wait<0>();
      __syncthreads();
      gemm.template qk<kBf16>(rS, sQ, sK, rQres);
      load_v(n, kFullN);
    }
    if constexpr (Cfg::kFeature) modify_scores(rS, n);
    if constexpr (kMask) {
      mask_fragment<16>(lengths(), rS, m0 + warp_row0 + (lane >> 2), n * kBN + warp_key0 + 2 * (lane & 3));
    }
    if constexpr (Cfg::kFeature && kBf16) {
      if (p.softcap_scale < 0.f)  // softcap's bound as the max (kernel_args.h)
        softmax.step_bounded(rS, p.scale_log2);
      else if constexpr (Cfg::kColSplit)
        softmax.step_pair(rS, rO, p.scale_log2, pair);
      else
        softmax.step(rS, rO, p.scale_log2);
    } else if constexpr (Cfg::kColSplit) {
      softmax.step_pair(rS, rO, p.scale_log2, pair);
    } else {
      softmax.step(rS, rO, p.scale_log2);
    }
    // This warp's P (o_col_split: its half of the keys).
    uint32_t rP[kNS / 2][kMT][4];
#pragma unroll
    for (int ks = 0; ks < kNS / 2; ++ks)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        rP[ks][mt][0] = arch::pack_f32x2<kBf16>(rS[mt][2 * ks][0], rS[mt][2 * ks][1]);
        rP[ks][mt][1] = arch::pack_f32x2<kBf16>(rS[mt][2 * ks][2], rS[mt][2 * ks][3]);
        rP[ks][mt][2] = arch::pack_f32x2<kBf16>(rS[mt][2 * ks + 1][0], rS[mt][2 * ks + 1][1]);
        rP[ks][mt][3] = arch::pack_f32x2<kBf16>(rS[mt][2 * ks + 1][2], rS[mt][2 * ks + 1][3]);
      }
    if constexpr (!Cfg::kEagerKV) {
      arch::cp_async_wait<0>();
      __syncthreads();
    }
    if constexpr (Cfg::kColSplit) {
      pair.store_p(rP);  // then waits for the partner's half
      gemm.template pv_loaded<kBf16>(rO, [&](uint32_t(&rp)[kMT][4], int ks) { pair.load_p(rp, ks); }, sV);
    } else {
      gemm.template pv<kBf16>(rO, rP, sV);
    }
    if constexpr (!Cfg::kEagerKV) __syncthreads();  // K/V buffers are refilled next iteration
  };

  // Blocks that need the mask: the partial last key block, and (causal) those crossing the
  // diagonal of the block's first row. Walking down, once one is clean all lower ones are.
  if constexpr (kLocal) {
    // A window: its right edge (with the partial last block) first, then the blocks every row
    // sees whole, then its left edge; blocks left of local.lo are never loaded.
    walk_local_blocks(local, n_end, iteration);
  } else {
    int n = n_end - 1;
    for (; n >= 0 && n_block_needs_mask(lengths(), n, m0, kBN); --n) iteration(n, std::true_type{});
    for (; n >= 0; --n) iteration(n, std::false_type{});
  }

  float inv[kMT][2], lse[kMT][2];
  if constexpr (Cfg::kColSplit) pair.add_partner_sums(softmax.row_sum);
  softmax.finalize(inv, lse, p.scale_log2);
  if constexpr (Cfg::kVarlen) varlen_out();
  // (varlen: the block's row count recomputed from shared memory, not held through the loop)
  epi.write(rO, inv, lse, gO, p.o_ss, gLse, Cfg::kVarlen ? min(kBM, lengths().sq - m0) : rows_valid, p.d_v);
}

// Every configuration but the varlen feature ones (Sm80FwdArgsOf<Cfg> keeps these kernels' names).
template <class Cfg, class Elem, MaskKind Kind>
__global__ void __launch_bounds__(Cfg::kThreads) sm80_fwd_kernel(const __grid_constant__ Sm80FwdArgsOf<Cfg> p) {
  sm80_fwd_block<Cfg, Elem, Kind>(p);
}

// The varlen feature configurations (Sm80FwdFeature over Sm80FwdVarlen): a kernel of its own
// for the parameter block with both the offsets and the window (see Sm80FwdArgsOf).
template <class Cfg, class Elem, MaskKind Kind>
__global__ void __launch_bounds__(Cfg::kThreads)
    sm80_fwd_varlen_feature_kernel(const __grid_constant__ Sm80FwdVarlenFeatureArgs p) {
  static_assert(Cfg::kVarlen && Cfg::kFeature, "sm80_fwd_kernel serves the other configurations");
  sm80_fwd_block<Cfg, Elem, Kind>(p);
}

}  // namespace flashattn::sm80
