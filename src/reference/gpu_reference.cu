// Naive GPU reference: one block per (query row, head, batch), fp32 accumulation, 64-bit
// offsets, correct for every shape the API accepts (q/k head dim d and v/out head dim d_v, each
// anything from 1 to 256). Speed is not a goal; obviousness is. Issue 17's sliding window,
// softcap and ALiBi (AttnParams) are written out here from their rule, not taken from the
// kernels' helpers, so this stays an independent yardstick.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "api/backends.h"
#include "common/mask.h"

namespace flashattn::detail {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 256;  // of q/k (sQ) and of v/out (acc): both checked at launch

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ float block_max(float x, float* red) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kThreads / 32; ++w) r = fmaxf(r, red[w]);
  __syncthreads();
  return r;
}

__device__ float block_sum(float x, float* red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float r = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) r += red[w];
  __syncthreads();
  return r;
}

// kLowp rounds scores and probabilities to T, as attention computed naively in the input
// precision would: the error yardstick ("out_lowp") of the correctness rule.
template <typename T, bool kLowp>
__global__ void __launch_bounds__(kThreads) reference_fwd_kernel(FwdParams p) {
  const int64_t i = blockIdx.x;  // query row (of its sequence)
  const int h = blockIdx.y;
  const int hk = h / p.h_ratio;
  const int t = threadIdx.x;
  // Varlen: block z is sequence z of the packed batch, rows relative to its offsets (lengths
  // clamped like the kernels': to the max lengths and the packed rows); b is then 0.
  int b = blockIdx.z, sq = p.sq, sk = p.sk;
  const int seq = blockIdx.z;  // batch or sequence index: ALiBi's slope row
  int64_t q_off = 0, k_off = 0;
  if (p.varlen()) {
    const int q0 = min(max(p.cu_q[b], 0), p.total_q), k0 = min(max(p.cu_k[b], 0), p.total_k);
    sq = max(0, min(min(p.cu_q[b + 1] - q0, p.sq), p.total_q - q0));
    sk = max(0, min(min(p.cu_k[b + 1] - k0, p.sk), p.total_k - k0));
    q_off = q0;
    k_off = k0;
    b = 0;
    if (i >= sq) return;
  }

  __shared__ float sQ[kMaxHeadDim];
  __shared__ float sP[kThreads];
  __shared__ float red[kThreads / 32];

  const T* q = static_cast<const T*>(p.q.ptr) + p.q.offset(b, q_off + i, h);
  const T* kb = static_cast<const T*>(p.k.ptr) + p.k.offset(b, k_off, hk);
  const T* vb = static_cast<const T*>(p.v.ptr) + p.v.offset(b, k_off, hk);
  for (int d = t; d < p.d; d += kThreads) sQ[d] = to_float(q[d]);
  __syncthreads();

  int64_t n_keys = p.causal ? Mask<MaskKind::kCausal>{sq, sk}.key_end(i) : sk;
  // Keys [j_lo, n_keys) are visible. The window: i + sk - sq - left <= j <= i + sk - sq + right,
  // a negative side unbounded; with causal both apply.
  const int64_t diag = i + sk - sq;
  int64_t j_lo = 0;
  if (p.window_left >= 0) j_lo = max(diag - p.window_left, static_cast<int64_t>(0));
  if (p.window_right >= 0) n_keys = max(min(n_keys, diag + p.window_right + 1), static_cast<int64_t>(0));
  if (n_keys < j_lo) n_keys = j_lo;  // sees no key
  // Softcap / ALiBi: s holds the finished score (scale, softcap, bias) and the softmax takes it
  // as is (unit 1); without them s is the raw q.k and the scale joins in the exponent.
  const bool mods = p.softcap > 0.f || p.alibi_slopes != nullptr;
  const float unit = mods ? 1.f : p.scale;
  const float slope = p.alibi_slopes != nullptr ? p.alibi_slopes[seq * p.alibi_batch_stride + h] : 0.f;
  float m = -INFINITY;  // running max of s
  float l = 0.f;        // running sum of exp(unit*(s - m))
  float acc[kMaxHeadDim / kThreads] = {0.f, 0.f};  // out elements t, t + kThreads (< d_v)

  for (int64_t j0 = j_lo; j0 < n_keys; j0 += kThreads) {
    const int64_t j = j0 + t;
    float s = -INFINITY;
    if (j < n_keys) {
      const T* kr = kb + j * p.k.ss;
      float dot = 0.f;
      for (int d = 0; d < p.d; ++d) dot = fmaf(sQ[d], to_float(kr[d]), dot);
      if (!mods) {
        s = kLowp ? to_float(from_float<T>(dot * p.scale)) / p.scale : dot;
      } else {
        float x = dot * p.scale;
        if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
        if (p.alibi_slopes != nullptr) x -= slope * fabsf(static_cast<float>(diag - j));
        s = kLowp ? to_float(from_float<T>(x)) : x;
      }
    }
    const float m_new = fmaxf(m, block_max(s, red));
    float pj = (j < n_keys) ? expf(unit * (s - m_new)) : 0.f;
    if (kLowp) pj = to_float(from_float<T>(pj));
    const float alpha = (m == -INFINITY) ? 0.f : expf(unit * (m - m_new));
    l = l * alpha + block_sum(pj, red);
    sP[t] = pj;
    __syncthreads();
    const int n_here = static_cast<int>(n_keys - j0 < kThreads ? n_keys - j0 : kThreads);
    for (int c = 0; c * kThreads + t < p.d_v; ++c) {
      const int d = c * kThreads + t;
      float a = acc[c] * alpha;
      for (int jj = 0; jj < n_here; ++jj) a = fmaf(sP[jj], to_float(vb[(j0 + jj) * p.v.ss + d]), a);
      acc[c] = a;
    }
    __syncthreads();
    m = m_new;
  }

  T* o = static_cast<T*>(p.o.ptr) + p.o.offset(b, q_off + i, h);
  const float inv = l > 0.f ? 1.f / l : 0.f;  // fully masked row: output 0
  for (int c = 0; c * kThreads + t < p.d_v; ++c) o[c * kThreads + t] = from_float<T>(acc[c] * inv);
  if (p.lse != nullptr && t == 0) {
    const int64_t at = p.varlen() ? static_cast<int64_t>(h) * p.total_q + q_off + i
                                  : (static_cast<int64_t>(b) * p.hq + h) * p.sq + i;
    p.lse[at] = l > 0.f ? m * unit + logf(l) : -INFINITY;
  }
}

template <bool kLowp>
Status launch_reference(const FwdParams& p, cudaStream_t stream) {
  if (p.d < 1 || p.d > kMaxHeadDim || p.d_v < 1 || p.d_v > kMaxHeadDim)
    return {StatusCode::kNotSupported, "backend reference: head dims d " + std::to_string(p.d) +
                                           ", d_v " + std::to_string(p.d_v) + " not in 1..256"};
  if (p.hq > 65535 || p.b > 65535)
    return {StatusCode::kNotSupported, "backend reference: heads or batch above 65535"};
  const dim3 grid(static_cast<unsigned>(p.sq), static_cast<unsigned>(p.hq),
                  static_cast<unsigned>(p.b));
  if (p.dtype == ElemType::kFloat16)
    reference_fwd_kernel<__half, kLowp><<<grid, kThreads, 0, stream>>>(p);
  else
    reference_fwd_kernel<__nv_bfloat16, kLowp><<<grid, kThreads, 0, stream>>>(p);
  return check_launch("reference kernel launch");
}

}  // namespace

Status reference_forward(const FwdParams& p, cudaStream_t stream) {
  return launch_reference<false>(p, stream);
}

Status reference_forward_lowp(const FwdParams& p, cudaStream_t stream) {
  return launch_reference<true>(p, stream);
}

}  // namespace flashattn::detail
