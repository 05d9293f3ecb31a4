// The backward's two small kernels around the main one.
// Preprocess (one warp per query row): dsum = rowsum(dO * O) in fp32, and the forward's lse in
// log2 units, +inf for rows that see no key (lse = -inf) and for the padding rows up to sq_pad,
// so the main kernel's P = exp2(scale_log2 S - lse_log2) is exactly 0 there without a test.
// Postprocess: dq = scale * (the fp32 accumulator), from the main kernel's thread order
// (BwdConfig::dq_element) to the caller's strided dq.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "arch/convert.h"
#include "common/params.h"
#include "sm90/bwd/varlen.h"

namespace flashattn::sm90 {

struct BwdPreArgs {
  detail::ConstTensor4 dout, o;
  const float* lse = nullptr;  // (B, Hq, sq)
  float* lse_log2 = nullptr;   // (B, Hq, sq_pad)
  float* dsum = nullptr;       // (B, Hq, sq_pad)
  int b = 0, hq = 0, sq = 0, sq_pad = 0, d = 0;
  // Lanes per row (a power of two, d / 8 rounded up, at most 32), and whether O's and dO's rows
  // may be read in 16-byte pieces (16-byte aligned bases and strides).
  int lanes = 32;
  bool vec = false;
};

__host__ __device__ constexpr int bwd_pre_lanes(int d) {
  int l = 1;
  while (l < 32 && 8 * l < d) l *= 2;
  return l;
}

// dsum's dot product of one row of O and dO over d columns, split over `lanes` consecutive lanes
// (sub: this lane's index among them), each reading 8 columns at a time: 16-byte loads where
// `vec` (the kernel is a pass over O and dO at copy bandwidth). The caller sums the lanes.
template <class Elem>
__device__ __forceinline__ float bwd_row_dot(const Elem* po, const Elem* pd, int d, int sub, int lanes, bool vec) {
  float acc = 0.f;
  if (vec) {
    for (int c = 8 * sub; c < d; c += 8 * lanes) {  // d is a multiple of 8
      const uint4 x = *reinterpret_cast<const uint4*>(po + c);
      const uint4 y = *reinterpret_cast<const uint4*>(pd + c);
      const Elem* xe = reinterpret_cast<const Elem*>(&x);
      const Elem* ye = reinterpret_cast<const Elem*>(&y);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc = fmaf(static_cast<float>(xe[i]), static_cast<float>(ye[i]), acc);
    }
  } else {
    for (int c = sub; c < d; c += lanes) acc = fmaf(static_cast<float>(po[c]), static_cast<float>(pd[c]), acc);
  }
  return acc;
}

__device__ __forceinline__ float bwd_lse_log2(float lse) {
  return lse == -INFINITY ? INFINITY : lse * static_cast<float>(M_LOG2E);
}

// Rows (b, h, m) over sq_pad, m fastest; `lanes` consecutive lanes share a row.
template <class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_preprocess(const BwdPreArgs a) {
  const int sub = threadIdx.x & (a.lanes - 1);
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x) / a.lanes;
  float acc = 0.f;
  float lse2 = INFINITY;
  const bool live = row < static_cast<int64_t>(a.b) * a.hq * a.sq_pad;
  const int m = live ? static_cast<int>(row % a.sq_pad) : 0;
  const int64_t bh = live ? row / a.sq_pad : 0;
  if (live && m < a.sq) {
    const int h = static_cast<int>(bh % a.hq), b = static_cast<int>(bh / a.hq);
    const Elem* po = static_cast<const Elem*>(a.o.ptr) + a.o.offset(b, m, h);
    const Elem* pd = static_cast<const Elem*>(a.dout.ptr) + a.dout.offset(b, m, h);
    acc = bwd_row_dot(po, pd, a.d, sub, a.lanes, a.vec);
    lse2 = bwd_lse_log2(a.lse[bh * a.sq + m]);
  }
  for (int off = a.lanes / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (live && sub == 0) {
    a.dsum[row] = acc;
    a.lse_log2[row] = lse2;
  }
}

struct BwdPostArgs {
  const float* dq_accum = nullptr;
  detail::Tensor4 dq;
  int b = 0, hq = 0, sq = 0, num_m_blocks = 0;
  int d = 0;  // dq's columns (the accumulator's past d are zero and not written)
  float scale = 0.f;
  bool vec = false;  // dq's rows may be written in 16-byte pieces
};

// The postprocess's shared tile of one query block: rows of the head dim plus 16 bytes, which
// put the 8 rows one warp writes in bwd_write_dq_rows on distinct banks.
template <class Cfg>
inline constexpr int kDqTilePitch = Cfg::kHeadDim + 8;

// The accumulator of one query block (the main kernel's thread order) read in float4s, scaled and
// converted into the shared tile's rows.
template <class Cfg, class Elem>
__device__ __forceinline__ void bwd_stage_dq_tile(const float* block, float scale, Elem* tile) {
  constexpr int kPitch = kDqTilePitch<Cfg>;
  constexpr int kVecs = Cfg::kBlockM * Cfg::kHeadDim / 4;
  const float4* src = reinterpret_cast<const float4*>(block);
  for (int v = threadIdx.x; v < kVecs; v += blockDim.x) {
    const float4 x = src[v];
    int r = 0, c = 0;
    Cfg::dq_element(4 * v, &r, &c);
    *reinterpret_cast<uint32_t*>(tile + r * kPitch + c) = arch::pack_f32x2<Cfg::kBf16>(x.x * scale, x.y * scale);
    *reinterpret_cast<uint32_t*>(tile + (r + 8) * kPitch + c) = arch::pack_f32x2<Cfg::kBf16>(x.z * scale, x.w * scale);
  }
}

// The staged tile's rows to dq in 16-byte pieces of whole rows (the thread order alone would
// scatter 4-byte pairs over 8 rows): rows [0, rows) of the tile (the ones the call owns) and their
// first d columns; row_ptr(r) is row r's first element in dq.
template <class Cfg, class Elem, class RowPtr>
__device__ __forceinline__ void bwd_write_dq_rows(const Elem* tile, int rows, int d, bool vec, RowPtr row_ptr) {
  constexpr int kPitch = kDqTilePitch<Cfg>;
  constexpr int kPieces = Cfg::kHeadDim / 8;
  for (int i = threadIdx.x; i < Cfg::kBlockM * kPieces; i += blockDim.x) {
    const int r = i / kPieces, c = 8 * (i % kPieces);
    if (r >= rows || c >= d) continue;  // d is a multiple of 8: a piece is all in or all out
    Elem* dst = row_ptr(r) + c;
    if (vec) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(tile + r * kPitch + c);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = tile[r * kPitch + c + e];
    }
  }
}

// One CTA per (b, h, query block).
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_postprocess(const BwdPostArgs a) {
  __shared__ alignas(16) Elem tile[Cfg::kBlockM * kDqTilePitch<Cfg>];
  const int64_t chunk = blockIdx.x;
  const int m_block = static_cast<int>(chunk % a.num_m_blocks);
  const int64_t bh = chunk / a.num_m_blocks;
  const int h = static_cast<int>(bh % a.hq), b = static_cast<int>(bh / a.hq);
  bwd_stage_dq_tile<Cfg>(a.dq_accum + chunk * (Cfg::kBlockM * Cfg::kHeadDim), a.scale, tile);
  __syncthreads();
  Elem* dq = static_cast<Elem*>(a.dq.ptr);
  bwd_write_dq_rows<Cfg>(tile, a.sq - m_block * Cfg::kBlockM, a.d, a.vec,
                         [&](int r) { return dq + a.dq.offset(b, m_block * Cfg::kBlockM + r, h); });
}

// ---- Varlen (bwd/varlen.h): the same two kernels over the padded packed scratch ----

// Zeroes kFloats floats (a multiple of 1024) from 256 threads, 16 bytes per store.
template <int kFloats>
__device__ __forceinline__ void bwd_zero_block(float* dst) {
  static_assert(kFloats % 1024 == 0, "whole float4 passes of 256 threads");
#pragma unroll 4
  for (int i = threadIdx.x; i < kFloats / 4; i += 256) reinterpret_cast<float4*>(dst)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

struct BwdVarlenPrepostArgs {
  detail::ConstTensor4 dout, o;  // (1, total_q, Hq, Dv)
  const float* lse = nullptr;    // (Hq, total_q)
  float* lse_log2 = nullptr;     // (Hq, num_blocks * kBlockM): VarlenLayout's rows
  float* dsum = nullptr;
  const float* dq_accum = nullptr;  // (Hq, num_blocks, kBlockM * D)
  float* dq_zero = nullptr;         // preprocess: the same accumulator, zeroed block by block
  detail::Tensor4 dq;               // (1, total_q, Hq, D)
  const int* cu_q = nullptr;
  int num_seqs = 0, max_q = 0, total_q = 0, hq = 0;
  int64_t num_blocks = 0;  // padded blocks per head
  int d = 0;               // preprocess: O's columns; postprocess: dq's
  float scale = 0.f;
  // As BwdPreArgs / BwdPostArgs: 16-byte rows of O and dO (preprocess), of dq (postprocess).
  bool vec = false;
};

// One CTA per padded block of a head: the block's sequence is found once (a bisection over the
// offsets), then bwd_pre_lanes(kHeadDim) lanes per row as the dense preprocess, every row's loads
// issued before any reduction. Rows inside the sequence as the dense preprocess, every other row
// (a sequence's last block past its end, the gaps between sequences' blocks) lse_log2 +inf and
// dsum 0, so P is 0 there. A block of a sequence also gets its dQ accumulator zeroed, which the
// main kernel adds into (the launcher skips the memset: the gaps' blocks, one per sequence, are
// never read or written).
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_preprocess_varlen(const BwdVarlenPrepostArgs a) {
  constexpr int kLanes = bwd_pre_lanes(Cfg::kHeadDim);  // O's columns d <= kHeadDim
  constexpr int kRowsPerPass = 256 / kLanes;
  constexpr int kPasses = Cfg::kBlockM / kRowsPerPass;
  static_assert(kPasses * kRowsPerPass == Cfg::kBlockM);
  const int64_t chunk = blockIdx.x;  // (head, padded block)
  const int h = static_cast<int>(chunk / a.num_blocks);
  const VarlenLayout<Cfg::kBlockM> layout{a.cu_q, a.num_seqs, a.max_q, a.total_q};
  VarlenRows seq;
  int mb = 0;
  const int rows = layout.find(chunk % a.num_blocks, &seq, &mb) >= 0 ? seq.len - mb * Cfg::kBlockM : 0;
  if (rows > 0) bwd_zero_block<Cfg::kBlockM * Cfg::kHeadDim>(a.dq_zero + chunk * (Cfg::kBlockM * Cfg::kHeadDim));
  const int sub = threadIdx.x % kLanes;
  float acc[kPasses], lse2[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int r = i * kRowsPerPass + static_cast<int>(threadIdx.x) / kLanes;
    acc[i] = 0.f;
    lse2[i] = INFINITY;
    if (r < rows) {
      const int64_t q = static_cast<int64_t>(seq.start) + mb * Cfg::kBlockM + r;
      const Elem* po = static_cast<const Elem*>(a.o.ptr) + a.o.offset(0, q, h);
      const Elem* pd = static_cast<const Elem*>(a.dout.ptr) + a.dout.offset(0, q, h);
      acc[i] = bwd_row_dot(po, pd, a.d, sub, kLanes, a.vec);
      lse2[i] = bwd_lse_log2(a.lse[static_cast<int64_t>(h) * a.total_q + q]);
    }
  }
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
#pragma unroll
    for (int off = kLanes / 2; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], off);
    if (sub == 0) {
      const int64_t row = chunk * Cfg::kBlockM + i * kRowsPerPass + static_cast<int>(threadIdx.x) / kLanes;
      a.dsum[row] = acc[i];
      a.lse_log2[row] = lse2[i];
    }
  }
}

// One CTA per padded block of a head, as the dense postprocess: the rows of a sequence's block
// inside the sequence go to the packed dq; blocks outside every sequence are skipped (dq rows
// outside sequences are never written).
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_postprocess_varlen(const BwdVarlenPrepostArgs a) {
  __shared__ alignas(16) Elem tile[Cfg::kBlockM * kDqTilePitch<Cfg>];
  const int64_t chunk = blockIdx.x;
  const int h = static_cast<int>(chunk / a.num_blocks);
  const VarlenLayout<Cfg::kBlockM> layout{a.cu_q, a.num_seqs, a.max_q, a.total_q};
  VarlenRows seq;
  int mb = 0;
  if (layout.find(chunk % a.num_blocks, &seq, &mb) < 0) return;  // the whole CTA: no barrier missed
  bwd_stage_dq_tile<Cfg>(a.dq_accum + chunk * (Cfg::kBlockM * Cfg::kHeadDim), a.scale, tile);
  __syncthreads();
  Elem* dq = static_cast<Elem*>(a.dq.ptr);
  bwd_write_dq_rows<Cfg>(tile, seq.len - mb * Cfg::kBlockM, a.d, a.vec, [&](int r) {
    return dq + a.dq.offset(0, static_cast<int64_t>(seq.start) + mb * Cfg::kBlockM + r, h);
  });
}

}  // namespace flashattn::sm90
