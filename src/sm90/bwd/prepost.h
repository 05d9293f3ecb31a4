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

// Rows (b, h, m) over sq_pad, m fastest; `lanes` consecutive lanes share a row, each reading 8
// columns at a time (16-byte loads: the kernel is a pass over O and dO at copy bandwidth).
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
    if (a.vec) {
      for (int c = 8 * sub; c < a.d; c += 8 * a.lanes) {  // d is a multiple of 8
        const uint4 x = *reinterpret_cast<const uint4*>(po + c);
        const uint4 y = *reinterpret_cast<const uint4*>(pd + c);
        const Elem* xe = reinterpret_cast<const Elem*>(&x);
        const Elem* ye = reinterpret_cast<const Elem*>(&y);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc = fmaf(static_cast<float>(xe[i]), static_cast<float>(ye[i]), acc);
      }
    } else {
      for (int c = sub; c < a.d; c += a.lanes) acc = fmaf(static_cast<float>(po[c]), static_cast<float>(pd[c]), acc);
    }
    const float l = a.lse[bh * a.sq + m];
    lse2 = l == -INFINITY ? INFINITY : l * static_cast<float>(M_LOG2E);
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

// One CTA per (b, h, query block): the accumulator (the main kernel's thread order) is read in
// float4s, scaled and converted into a shared tile of the block's rows, then written to dq in
// 16-byte pieces of whole rows (the thread order alone would scatter 4-byte pairs over 8 rows).
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_postprocess(const BwdPostArgs a) {
  // Row pitch: 16 bytes of padding put the 8 rows one warp writes in phase 1 on distinct banks.
  constexpr int kPitch = Cfg::kHeadDim + 8;
  __shared__ alignas(16) Elem tile[Cfg::kBlockM * kPitch];
  const int64_t chunk = blockIdx.x;
  const int m_block = static_cast<int>(chunk % a.num_m_blocks);
  const int64_t bh = chunk / a.num_m_blocks;
  const int h = static_cast<int>(bh % a.hq), b = static_cast<int>(bh / a.hq);
  constexpr int kVecs = Cfg::kBlockM * Cfg::kHeadDim / 4;
  const float4* src = reinterpret_cast<const float4*>(a.dq_accum + chunk * (Cfg::kBlockM * Cfg::kHeadDim));
  for (int v = threadIdx.x; v < kVecs; v += blockDim.x) {
    const float4 x = src[v];
    int r = 0, c = 0;
    Cfg::dq_element(4 * v, &r, &c);
    *reinterpret_cast<uint32_t*>(tile + r * kPitch + c) = arch::pack_f32x2<Cfg::kBf16>(x.x * a.scale, x.y * a.scale);
    *reinterpret_cast<uint32_t*>(tile + (r + 8) * kPitch + c) = arch::pack_f32x2<Cfg::kBf16>(x.z * a.scale, x.w * a.scale);
  }
  __syncthreads();
  Elem* dq = static_cast<Elem*>(a.dq.ptr);
  constexpr int kPieces = Cfg::kHeadDim / 8;
  for (int i = threadIdx.x; i < Cfg::kBlockM * kPieces; i += blockDim.x) {
    const int r = i / kPieces, c = 8 * (i % kPieces);
    const int m = m_block * Cfg::kBlockM + r;
    if (m >= a.sq || c >= a.d) continue;  // d is a multiple of 8: a piece is all in or all out
    Elem* dst = dq + a.dq.offset(b, m, h) + c;
    if (a.vec) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(tile + r * kPitch + c);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = tile[r * kPitch + c + e];
    }
  }
}

// ---- Varlen (bwd/varlen.h): the same two kernels over the padded packed scratch ----

struct BwdVarlenPrepostArgs {
  detail::ConstTensor4 dout, o;  // (1, total_q, Hq, Dv)
  const float* lse = nullptr;    // (Hq, total_q)
  float* lse_log2 = nullptr;     // (Hq, num_blocks * kBlockM): VarlenLayout's rows
  float* dsum = nullptr;
  const float* dq_accum = nullptr;  // (Hq, num_blocks, kBlockM * D)
  detail::Tensor4 dq;               // (1, total_q, Hq, D)
  const int* cu_q = nullptr;
  int num_seqs = 0, max_q = 0, total_q = 0, hq = 0;
  int64_t num_blocks = 0;  // padded blocks per head
  int d = 0;               // preprocess: O's columns; postprocess: dq's
  float scale = 0.f;
};

// One warp per padded row (head, row): rows inside a sequence as the dense preprocess, every
// other row (a sequence's last block past its end, the gaps between sequences' blocks) lse_log2
// +inf and dsum 0, so P is 0 there.
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_preprocess_varlen(const BwdVarlenPrepostArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t rows_per_head = a.num_blocks * Cfg::kBlockM;
  if (row >= a.hq * rows_per_head) return;
  const int h = static_cast<int>(row / rows_per_head);
  const int64_t r = row % rows_per_head;
  const VarlenLayout<Cfg::kBlockM> layout{a.cu_q, a.num_seqs, a.max_q, a.total_q};
  VarlenRows seq;
  int mb = 0;
  float acc = 0.f;
  float lse2 = INFINITY;
  if (layout.find(r / Cfg::kBlockM, &seq, &mb) >= 0) {
    const int m = mb * Cfg::kBlockM + static_cast<int>(r % Cfg::kBlockM);
    if (m < seq.len) {
      const int64_t q = static_cast<int64_t>(seq.start) + m;
      const Elem* po = static_cast<const Elem*>(a.o.ptr) + a.o.offset(0, q, h);
      const Elem* pd = static_cast<const Elem*>(a.dout.ptr) + a.dout.offset(0, q, h);
      for (int c = 2 * lane; c < a.d; c += 64) {
        acc += static_cast<float>(po[c]) * static_cast<float>(pd[c]);
        acc += static_cast<float>(po[c + 1]) * static_cast<float>(pd[c + 1]);
      }
      const float l = a.lse[static_cast<int64_t>(h) * a.total_q + q];
      lse2 = l == -INFINITY ? INFINITY : l * static_cast<float>(M_LOG2E);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    a.dsum[row] = acc;
    a.lse_log2[row] = lse2;
  }
}

// One CTA per padded block of a head: the rows of a sequence's block inside the sequence go to
// the packed dq; blocks outside every sequence are skipped (dq rows outside sequences are never
// written).
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm90_bwd_postprocess_varlen(const BwdVarlenPrepostArgs a) {
  const int64_t chunk = blockIdx.x;
  const int h = static_cast<int>(chunk / a.num_blocks);
  const VarlenLayout<Cfg::kBlockM> layout{a.cu_q, a.num_seqs, a.max_q, a.total_q};
  VarlenRows seq;
  int mb = 0;
  if (layout.find(chunk % a.num_blocks, &seq, &mb) < 0) return;
  constexpr int kVecs = Cfg::kBlockM * Cfg::kHeadDim / 4;
  const float4* src = reinterpret_cast<const float4*>(a.dq_accum + chunk * (Cfg::kBlockM * Cfg::kHeadDim));
  Elem* dq = static_cast<Elem*>(a.dq.ptr);
  for (int v = threadIdx.x; v < kVecs; v += blockDim.x) {
    int r = 0, c = 0;
    Cfg::dq_element(4 * v, &r, &c);
    if (c >= a.d) continue;
    const int m = mb * Cfg::kBlockM + r;
    if (m >= seq.len) continue;  // rows r + 8 lie further still
    const float4 x = src[v];
    const int64_t q = static_cast<int64_t>(seq.start) + m;
    *reinterpret_cast<uint32_t*>(dq + a.dq.offset(0, q, h) + c) = arch::pack_f32x2<Cfg::kBf16>(x.x * a.scale, x.y * a.scale);
    if (m + 8 < seq.len)
      *reinterpret_cast<uint32_t*>(dq + a.dq.offset(0, q + 8, h) + c) =
          arch::pack_f32x2<Cfg::kBf16>(x.z * a.scale, x.w * a.scale);
  }
}

}  // namespace flashattn::sm90
