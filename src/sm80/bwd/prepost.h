// The sm80 backward's two small kernels around the main one (plain CUDA, no arch-specific
// instruction). They do what the sm90 ones (sm90/bwd/prepost.h) do, over this family's scratch
// layout (bwd/kernel_args.h): the sm90 postprocess reads its accumulator in that kernel's thread
// order, so only the preprocess would be shareable, and it lives under sm90/.
// Preprocess (8-32 lanes per row by d_v): dsum = rowsum(dO * O) in fp32, the row's dQ accumulator
// zeroed, and the forward's lse in log2 units, +inf for rows that see no key (lse = -inf) and for
// the padding rows up to sq_pad, so the main kernel's P = exp2(S * scale_log2 - lse_log2) is
// exactly 0 there without a test.
// Postprocess: dq = scale * (the fp32 accumulator) into the caller's strided dq.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "arch/convert.h"
#include "common/varlen_layout.h"
#include "sm80/bwd/kernel_args.h"

namespace flashattn::sm80 {

template <class Elem>
__device__ __forceinline__ float2 elem2_to_float2(uint32_t x) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&x));
  }
}

// One row's part for this lane of the kLanes that share the row: rowsum(dO * O) over d_v columns
// (the caller reduces across the kLanes). Rows are 16-B aligned and d_v a multiple of 8
// (validation): one uint4 is 8 elements.
template <class Elem, int kLanes = 32>
__device__ __forceinline__ float row_dot_lane(const Elem* po, const Elem* pd, int d_v, int lane) {
  float acc = 0.f;
  for (int c = 8 * lane; c < d_v; c += 8 * kLanes) {
    const uint4 xo = *reinterpret_cast<const uint4*>(po + c);
    const uint4 xd = *reinterpret_cast<const uint4*>(pd + c);
    const uint32_t wo[4] = {xo.x, xo.y, xo.z, xo.w}, wd[4] = {xd.x, xd.y, xd.z, xd.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 fo = elem2_to_float2<Elem>(wo[i]), fd = elem2_to_float2<Elem>(wd[i]);
      acc = fmaf(fo.x, fd.x, acc);
      acc = fmaf(fo.y, fd.y, acc);
    }
  }
  return acc;
}

// The forward's lse (natural log) in log2 units, +inf for a row that saw no key (lse = -inf).
__device__ __forceinline__ float lse_to_log2(float l) {
  return l == -INFINITY ? INFINITY : l * static_cast<float>(M_LOG2E);
}

// 8 accumulator columns (two float4) times scale, as one 16-B store of dq.
template <class Elem>
__device__ __forceinline__ void store_dq8(const float* src_f, float scale, Elem* dst) {
  constexpr bool kBf16 = std::is_same_v<Elem, __nv_bfloat16>;
  const float4* src = reinterpret_cast<const float4*>(src_f);
  const float4 x = src[0], y = src[1];
  uint4 out;
  out.x = arch::pack_f32x2<kBf16>(x.x * scale, x.y * scale);
  out.y = arch::pack_f32x2<kBf16>(x.z * scale, x.w * scale);
  out.z = arch::pack_f32x2<kBf16>(y.x * scale, y.y * scale);
  out.w = arch::pack_f32x2<kBf16>(y.z * scale, y.w * scale);
  *reinterpret_cast<uint4*>(dst) = out;
}

// The same from four float2 column pairs kStride floats apart (config.h kDqPairStride); 2 is
// store_dq8's contiguous layout.
template <class Elem, int kStride>
__device__ __forceinline__ void store_dq8_pairs(const float* src, float scale, Elem* dst) {
  if constexpr (kStride == 2) {
    store_dq8(src, scale, dst);
  } else {
    constexpr bool kBf16 = std::is_same_v<Elem, __nv_bfloat16>;
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 x = *reinterpret_cast<const float2*>(src + j * kStride);
      w[j] = arch::pack_f32x2<kBf16>(x.x * scale, x.y * scale);
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// kLanes lanes per row (8 for d_v <= 64, 16 up to 128, 32 above: launch.h), so that no lane of a
// short row idles and a block covers 256 / kLanes rows.
template <class Elem, int kLanes>
__global__ void __launch_bounds__(256) sm80_bwd_preprocess(const Sm80BwdPreArgs a) {
  static_assert(kLanes == 8 || kLanes == 16 || kLanes == 32);
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x) / kLanes;  // (b, h, m) over sq_pad
  const int lane = threadIdx.x % kLanes;
  const bool in_range = row < static_cast<int64_t>(a.b) * a.hq * a.sq_pad;
  const int m = static_cast<int>(row % a.sq_pad);
  const int64_t bh = row / a.sq_pad;
  const int h = static_cast<int>(bh % a.hq), b = static_cast<int>(bh / a.hq);
  float acc = 0.f;
  float lse2 = INFINITY;
  if (in_range && m < a.sq) {
    acc = row_dot_lane<Elem, kLanes>(static_cast<const Elem*>(a.o.ptr) + a.o.offset(b, m, h),
                                     static_cast<const Elem*>(a.dout.ptr) + a.dout.offset(b, m, h), a.d_v, lane);
    lse2 = lse_to_log2(a.lse[bh * a.sq + m]);
  }
  if (in_range) {
    float4* z = reinterpret_cast<float4*>(a.dq_zero + row * a.acc_cols);
    for (int c = lane; c < a.acc_cols / 4; c += kLanes) z[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // Every lane of the warp takes part (no early return): a warp's rows may straddle the end.
#pragma unroll
  for (int off = kLanes / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (in_range && lane == 0) {
    a.dsum[row] = acc;
    a.lse_log2[row] = lse2;
  }
}

// One thread per 8 columns of one row below sq: two float4 reads, one 16-B store. at(bh, m, c):
// where row m, columns c.. of (batch, head) bh sit in the accumulator.
template <class Elem, class At, int kPairStride = 2>
__device__ __forceinline__ void postprocess_rows(const Sm80BwdPostArgs& a, At at) {
  const int chunks = a.d / 8;
  const int64_t total = static_cast<int64_t>(a.b) * a.hq * a.sq * chunks;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % chunks) * 8;
    const int64_t row = i / chunks;  // (b, h, m) over sq
    const int m = static_cast<int>(row % a.sq);
    const int64_t bh = row / a.sq;
    const int h = static_cast<int>(bh % a.hq), b = static_cast<int>(bh / a.hq);
    store_dq8_pairs<Elem, kPairStride>(at(bh, m, c), a.scale, static_cast<Elem*>(a.dq.ptr) + a.dq.offset(b, m, h) + c);
  }
}

template <int kHeadDim, class Elem>
__global__ void __launch_bounds__(256) sm80_bwd_postprocess(const Sm80BwdPostArgs a) {
  postprocess_rows<Elem>(a,
                         [&](int64_t bh, int m, int c) { return a.dq_accum + ((bh * a.sq_pad + m) * kHeadDim + c); });
}

// The same over an accumulator in Cfg's warp order (config.h kDqFragOrder, dq_frag_offset): each
// row's 8 columns are still 8 contiguous floats, at their place in the row's query block.
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm80_bwd_postprocess_frag(const Sm80BwdPostArgs a) {
  constexpr int kBM = Cfg::kBlockM;
  auto at = [&](int64_t bh, int m, int c) {
    return a.dq_accum + ((bh * a.sq_pad + m / kBM * kBM) * Cfg::kHeadDim + Cfg::dq_frag_offset(m % kBM, c));
  };
  postprocess_rows<Elem, decltype(at), Cfg::kDqPairStride>(a, at);
}

// ---- Varlen (Sm80BwdVarlenArgs): the same two kernels over the padded packed scratch ----
// One CTA per (head, padded block of kBlockM rows) (common/varlen_layout.h), the block's sequence
// found once by bisection; a block of no sequence is all padding.

// Preprocess: each warp one row at a time, as the dense one; padding rows get dsum 0 and
// lse_log2 +inf. A block of a sequence also gets its dQ accumulator zeroed, which the main kernel
// adds into (the launcher skips the memset: the gaps' blocks are never read or written).
template <int kBlockM, int kHeadDim, class Elem>
__global__ void __launch_bounds__(256) sm80_bwd_preprocess_varlen(const Sm80BwdVarlenPrepostArgs a) {
  const int64_t chunk = blockIdx.x;  // (head, padded block)
  const int h = static_cast<int>(chunk / a.num_blocks);
  const detail::VarlenLayout<kBlockM> layout{a.cu_q, a.num_seqs, a.max_q, a.total_q};
  detail::VarlenRows seq;
  int mb = 0;
  const int rows = layout.find(chunk % a.num_blocks, &seq, &mb) >= 0 ? seq.len - mb * kBlockM : 0;
  if (rows > 0) {
    float4* z = reinterpret_cast<float4*>(a.dq_zero + chunk * (kBlockM * kHeadDim));
    for (int i = threadIdx.x; i < kBlockM * kHeadDim / 4; i += 256) z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const int lane = threadIdx.x % 32;
  for (int r = static_cast<int>(threadIdx.x) / 32; r < kBlockM; r += 8) {
    float acc = 0.f, lse2 = INFINITY;
    if (r < rows) {
      const int64_t q = static_cast<int64_t>(seq.start) + mb * kBlockM + r;
      acc = row_dot_lane(static_cast<const Elem*>(a.o.ptr) + a.o.offset(0, q, h),
                         static_cast<const Elem*>(a.dout.ptr) + a.dout.offset(0, q, h), a.d_v, lane);
      lse2 = lse_to_log2(a.lse[static_cast<int64_t>(h) * a.total_q + q]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
      const int64_t row = chunk * kBlockM + r;
      a.dsum[row] = acc;
      a.lse_log2[row] = lse2;
    }
  }
}

// Postprocess: the block's rows inside its sequence, 8 columns per thread, into the packed dq;
// rows outside every sequence are never written. at(r, c): where the block's row r, columns c..
// sit in the accumulator.
template <int kBlockM, class Elem, class At, int kPairStride = 2>
__device__ __forceinline__ void postprocess_varlen_rows(const Sm80BwdVarlenPrepostArgs& a, At at) {
  const int64_t chunk = blockIdx.x;
  const int h = static_cast<int>(chunk / a.num_blocks);
  const detail::VarlenLayout<kBlockM> layout{a.cu_q, a.num_seqs, a.max_q, a.total_q};
  detail::VarlenRows seq;
  int mb = 0;
  if (layout.find(chunk % a.num_blocks, &seq, &mb) < 0) return;
  const int rows = min(kBlockM, seq.len - mb * kBlockM);
  const int chunks = a.d / 8;
  for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
    const int r = i / chunks, c = (i - r * chunks) * 8;
    const int64_t q = static_cast<int64_t>(seq.start) + mb * kBlockM + r;
    store_dq8_pairs<Elem, kPairStride>(at(r, c), a.scale, static_cast<Elem*>(a.dq.ptr) + a.dq.offset(0, q, h) + c);
  }
}

template <int kBlockM, int kHeadDim, class Elem>
__global__ void __launch_bounds__(256) sm80_bwd_postprocess_varlen(const Sm80BwdVarlenPrepostArgs a) {
  const int64_t chunk = blockIdx.x;
  postprocess_varlen_rows<kBlockM, Elem>(
      a, [&](int r, int c) { return a.dq_accum + ((chunk * kBlockM + r) * kHeadDim + c); });
}

// The varlen postprocess over an accumulator in Cfg's warp order (sm80_bwd_postprocess_frag).
template <class Cfg, class Elem>
__global__ void __launch_bounds__(256) sm80_bwd_postprocess_varlen_frag(const Sm80BwdVarlenPrepostArgs a) {
  const int64_t chunk = blockIdx.x;
  auto at = [&](int r, int c) {
    return a.dq_accum + (chunk * Cfg::kBlockM * Cfg::kHeadDim + Cfg::dq_frag_offset(r, c));
  };
  postprocess_varlen_rows<Cfg::kBlockM, Elem, decltype(at), Cfg::kDqPairStride>(a, at);
}

}  // namespace flashattn::sm80
