// Naive GPU backward: two kernels that need no scratch, fp32 accumulation, 64-bit offsets,
// every stride BwdParams can describe. Each recomputes what it needs (scores from q and k, P
// from the forward's lse, rowsum(dO * O) from dout and out) instead of reading intermediate
// tensors, so the two are independent and either answers alone for its gradients:
//   - dq: one block per (query row, head, batch); its warps split the row's keys.
//   - dk/dv: one block per (key, kv head, batch); its warps split the rows of every query head
//     of the group, so the GQA sum happens in registers, never through atomics.
// A warp owns one (row, key) pair at a time with the lanes across the head dim: the loads of a
// row are contiguous and the three dot products are warp reductions. q, k, dq, dk rows are d
// wide; v, out, dout, dv rows d_v wide (each 1..256; lanes past a row's width hold 0). Every
// sum runs in a fixed order, so the result is bitwise reproducible. Issue 17 (AttnParams): the
// sliding window bounds each row's keys and each key's rows; softcap's 1 - tanh^2 multiplies dS;
// ALiBi adds a constant to the score (its gradient path is plain). Written from the rule here.
// Varlen (BwdParams::varlen()): block z is a sequence, rows and keys relative to its offsets
// (lengths clamped as the kernels clamp them), every rule above per sequence; rows outside every
// sequence are neither read nor written.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "api/backends.h"
#include "common/mask.h"

namespace flashattn::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxHeadDim = 256;  // of d and of d_v, checked at launch
constexpr int kPerLane = kMaxHeadDim / 32;  // lane l holds head-dim elements l, l+32, ...

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
// What a 16-bit kernel does to a value before feeding it to a tensor-core product.
template <typename T, bool kLowp>
__device__ __forceinline__ float operand(float x) {
  return kLowp ? to_float(from_float<T>(x)) : x;
}

template <typename T>
__device__ __forceinline__ void load_row(const T* row, int d, int lane, float (&x)[kPerLane]) {
  FLASHATTN_UNROLL
  for (int c = 0; c < kPerLane; ++c) {
    const int e = c * 32 + lane;
    x[c] = e < d ? to_float(row[e]) : 0.f;
  }
}

__device__ __forceinline__ float warp_dot(const float (&a)[kPerLane], const float (&b)[kPerLane]) {
  float s = 0.f;
  FLASHATTN_UNROLL
  for (int c = 0; c < kPerLane; ++c) s = fmaf(a[c], b[c], s);
  FLASHATTN_UNROLL
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;  // every lane holds the same sum (butterfly)
}

// P of one (row, key) pair from the forward's lse. A row whose lse is -inf saw no key in the
// forward: its P is 0 whatever the score (exp(s + inf) would be inf, then NaN in dS).
__device__ __forceinline__ float prob(float dot, float scale, float lse) {
  return lse == -INFINITY ? 0.f : expf(fmaf(dot, scale, -lse));
}

// Softcap and ALiBi of one (row, key) pair: P from the finished score, and dtanh = d score /
// d (scale * q.k) (1 without softcap), which joins dS before the final scale.
struct ScoreMods {
  bool on = false;
  float softcap = 0.f, slope = 0.f;
  bool alibi = false;
  __device__ __forceinline__ float prob_of(float dot, float scale, float lse, int64_t dist, float& dtanh) const {
    float x = dot * scale;
    dtanh = 1.f;
    if (softcap > 0.f) {
      const float th = tanhf(x / softcap);
      x = softcap * th;
      dtanh = 1.f - th * th;
    }
    if (alibi) x -= slope * fabsf(static_cast<float>(dist));
    return lse == -INFINITY ? 0.f : expf(x - lse);
  }
};
__device__ __forceinline__ ScoreMods score_mods(const BwdParams& p, int b, int h) {
  ScoreMods m;
  m.softcap = p.softcap;
  m.alibi = p.alibi_slopes != nullptr;
  m.slope = m.alibi ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;
  m.on = m.softcap > 0.f || m.alibi;
  return m;
}

// One batch entry of the call: the dense batch b, or sequence b of a varlen call (b then 0 for
// the tensors' batch index, rows shifted by the sequence's offsets, its own lengths).
struct Seq {
  int b = 0;      // batch index into the tensors
  int seq = 0;    // batch or sequence index (ALiBi's slope row)
  int sq = 0, sk = 0;
  int64_t q_off = 0, k_off = 0;
};
__device__ __forceinline__ Seq sequence(const BwdParams& p, int z) {
  Seq s;
  s.b = z;
  s.seq = z;
  s.sq = p.sq;
  s.sk = p.sk;
  if (p.varlen()) {
    const int q0 = min(max(p.cu_q[z], 0), p.total_q), k0 = min(max(p.cu_k[z], 0), p.total_k);
    s.sq = max(0, min(min(p.cu_q[z + 1] - q0, p.sq), p.total_q - q0));
    s.sk = max(0, min(min(p.cu_k[z + 1] - k0, p.sk), p.total_k - k0));
    s.q_off = q0;
    s.k_off = k0;
    s.b = 0;
  }
  return s;
}
// Element index of the forward's lse for row i of s, head h: (B, Hq, Sq), varlen (Hq, total_q).
__device__ __forceinline__ int64_t lse_at(const BwdParams& p, const Seq& s, int h, int64_t i) {
  return p.varlen() ? static_cast<int64_t>(h) * p.total_q + s.q_off + i : (static_cast<int64_t>(s.b) * p.hq + h) * p.sq + i;
}

// Adds each warp's partial row into the block's result in warp order (fixed, so reproducible)
// and stores it scaled and converted. Called by every thread of the block.
template <typename T>
__device__ void reduce_store(const float (&part)[kPerLane], float scale, int d, T* dst,
                             float (*red)[kMaxHeadDim]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  FLASHATTN_UNROLL
  for (int c = 0; c < kPerLane; ++c) red[warp][c * 32 + lane] = part[c];
  __syncthreads();
  for (int e = threadIdx.x; e < d; e += kThreads) {
    float s = 0.f;
    for (int w = 0; w < kWarps; ++w) s += red[w][e];
    dst[e] = from_float<T>(s * scale);
  }
  __syncthreads();  // red is reused by the caller's next reduction
}

template <typename T, bool kLowp>
__global__ void __launch_bounds__(kThreads) reference_bwd_dq_kernel(BwdParams p) {
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y;
  const Seq sn = sequence(p, blockIdx.z);
  if (i >= sn.sq) return;  // varlen: past this sequence's rows
  const int b = sn.b;
  const int hk = h / p.h_ratio;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ float red[kWarps][kMaxHeadDim];

  const int64_t row = sn.q_off + i;  // in the tensors
  float q[kPerLane], dout[kPerLane], o[kPerLane];
  load_row(static_cast<const T*>(p.q.ptr) + p.q.offset(b, row, h), p.d, lane, q);
  load_row(static_cast<const T*>(p.dout.ptr) + p.dout.offset(b, row, h), p.d_v, lane, dout);
  load_row(static_cast<const T*>(p.o.ptr) + p.o.offset(b, row, h), p.d_v, lane, o);
  const float lse = p.lse[lse_at(p, sn, h, i)];
  const float dsum = warp_dot(dout, o);  // rowsum(P * dP) of this row
  int64_t n_keys = p.causal ? Mask<MaskKind::kCausal>{sn.sq, sn.sk}.key_end(i) : sn.sk;
  // The window: keys [j_lo, n_keys), i + sk - sq - left <= j <= i + sk - sq + right.
  const int64_t diag = i + sn.sk - sn.sq;
  int64_t j_lo = 0;
  if (p.window_left >= 0) j_lo = max(diag - p.window_left, static_cast<int64_t>(0));
  if (p.window_right >= 0) n_keys = max(min(n_keys, diag + p.window_right + 1), static_cast<int64_t>(0));
  const ScoreMods mods = score_mods(p, sn.seq, h);

  const T* kb = static_cast<const T*>(p.k.ptr) + p.k.offset(b, sn.k_off, hk);
  const T* vb = static_cast<const T*>(p.v.ptr) + p.v.offset(b, sn.k_off, hk);
  float acc[kPerLane] = {};
  for (int64_t j = j_lo + warp; j < n_keys; j += kWarps) {
    float k[kPerLane], v[kPerLane];
    load_row(kb + j * p.k.ss, p.d, lane, k);
    load_row(vb + j * p.v.ss, p.d_v, lane, v);
    float dtanh = 1.f;
    const float pj = mods.on ? mods.prob_of(warp_dot(q, k), p.scale, lse, diag - j, dtanh)
                             : prob(warp_dot(q, k), p.scale, lse);
    const float ds = operand<T, kLowp>(pj * (warp_dot(dout, v) - dsum) * dtanh);
    FLASHATTN_UNROLL
    for (int c = 0; c < kPerLane; ++c) acc[c] = fmaf(ds, k[c], acc[c]);
  }
  // A row without keys leaves acc at 0: dq is written as 0, never left unwritten.
  reduce_store(acc, p.scale, p.d, static_cast<T*>(p.dq.ptr) + p.dq.offset(b, row, h), red);
}

template <typename T, bool kLowp>
__global__ void __launch_bounds__(kThreads) reference_bwd_dkdv_kernel(BwdParams p) {
  const int64_t j = blockIdx.x;
  const int hk = blockIdx.y;
  const Seq sn = sequence(p, blockIdx.z);
  if (j >= sn.sk) return;  // varlen: past this sequence's keys
  const int b = sn.b;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ float red[kWarps][kMaxHeadDim];

  const int64_t key = sn.k_off + j;  // in the tensors
  float k[kPerLane], v[kPerLane];
  load_row(static_cast<const T*>(p.k.ptr) + p.k.offset(b, key, hk), p.d, lane, k);
  load_row(static_cast<const T*>(p.v.ptr) + p.v.offset(b, key, hk), p.d_v, lane, v);
  // Rows before row_begin do not see this key (their P is 0): they are skipped, not masked.
  int64_t first_row = p.causal ? Mask<MaskKind::kCausal>{sn.sq, sn.sk}.row_begin(j) : 0;
  // The window: rows [first_row, end_row) see key j, j - (sk - sq) - right <= i <= j - (sk - sq) + left.
  const int64_t anti = j - (sn.sk - sn.sq);
  int64_t end_row = sn.sq;
  if (p.window_right >= 0) first_row = max(first_row, anti - p.window_right);
  if (p.window_left >= 0) end_row = min(end_row, anti + p.window_left + 1);

  float dk[kPerLane] = {}, dv[kPerLane] = {};
  for (int g = 0; g < p.h_ratio; ++g) {
    const int h = hk * p.h_ratio + g;
    const T* qb = static_cast<const T*>(p.q.ptr) + p.q.offset(b, sn.q_off, h);
    const T* db = static_cast<const T*>(p.dout.ptr) + p.dout.offset(b, sn.q_off, h);
    const T* ob = static_cast<const T*>(p.o.ptr) + p.o.offset(b, sn.q_off, h);
    const float* lse_row = p.lse + lse_at(p, sn, h, 0);
    const ScoreMods mods = score_mods(p, sn.seq, h);
    for (int64_t i = first_row + warp; i < end_row; i += kWarps) {
      float q[kPerLane], dout[kPerLane], o[kPerLane];
      load_row(qb + i * p.q.ss, p.d, lane, q);
      load_row(db + i * p.dout.ss, p.d_v, lane, dout);
      load_row(ob + i * p.o.ss, p.d_v, lane, o);
      float dtanh = 1.f;
      const float pj = mods.on ? mods.prob_of(warp_dot(q, k), p.scale, lse_row[i], i - anti, dtanh)
                               : prob(warp_dot(q, k), p.scale, lse_row[i]);
      const float ds = operand<T, kLowp>(pj * (warp_dot(dout, v) - warp_dot(dout, o)) * dtanh);
      const float pv = operand<T, kLowp>(pj);
      FLASHATTN_UNROLL
      for (int c = 0; c < kPerLane; ++c) {
        dv[c] = fmaf(pv, dout[c], dv[c]);
        dk[c] = fmaf(ds, q[c], dk[c]);
      }
    }
  }
  reduce_store(dk, p.scale, p.d, static_cast<T*>(p.dk.ptr) + p.dk.offset(b, key, hk), red);
  reduce_store(dv, 1.f, p.d_v, static_cast<T*>(p.dv.ptr) + p.dv.offset(b, key, hk), red);
}

template <typename T, bool kLowp>
void launch_kernels(const BwdParams& p, cudaStream_t stream) {
  // An empty side has no blocks to launch (a zero grid dimension is a launch error); the other
  // kernel still writes its gradients, as zeros when nothing reaches them.
  if (p.sq > 0)
    reference_bwd_dq_kernel<T, kLowp><<<dim3(static_cast<unsigned>(p.sq), static_cast<unsigned>(p.hq),
                                             static_cast<unsigned>(p.b)),
                                        kThreads, 0, stream>>>(p);
  if (p.sk > 0)
    reference_bwd_dkdv_kernel<T, kLowp><<<dim3(static_cast<unsigned>(p.sk), static_cast<unsigned>(p.hkv),
                                               static_cast<unsigned>(p.b)),
                                          kThreads, 0, stream>>>(p);
}

template <bool kLowp>
Status launch_reference_backward(const BwdParams& p, cudaStream_t stream) {
  if (p.hq > 65535 || p.b > 65535)
    return {StatusCode::kNotSupported, "backend reference: heads or batch above 65535"};
  if (p.b == 0 || p.hq == 0 || p.d == 0) return Status::Ok();
  if (p.d > kMaxHeadDim || p.d_v < 1 || p.d_v > kMaxHeadDim)
    return {StatusCode::kNotSupported, "backend reference: head dims d " + std::to_string(p.d) +
                                           ", d_v " + std::to_string(p.d_v) + " not in 1..256"};
  if (p.dtype == ElemType::kFloat16)
    launch_kernels<__half, kLowp>(p, stream);
  else
    launch_kernels<__nv_bfloat16, kLowp>(p, stream);
  return check_launch("reference backward launch");
}

}  // namespace

Status reference_backward(const BwdParams& p, cudaStream_t stream) {
  return launch_reference_backward<false>(p, stream);
}

Status reference_backward_lowp(const BwdParams& p, cudaStream_t stream) {
  return launch_reference_backward<true>(p, stream);
}

}  // namespace flashattn::detail
