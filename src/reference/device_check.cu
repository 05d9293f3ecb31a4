#include "reference/device_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <string>

#include "api/backends.h"
#include "api/validate.h"

namespace flashattn::check {
namespace {

__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

template <typename T>
__global__ void fill_kernel(T* p, int64_t n, uint64_t seed, float mean, float half_range) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float u = float(mix(seed * 0x9e3779b97f4a7c15ULL + uint64_t(i)) >> 40) / float(1 << 24);
    const float x = mean + half_range * (2.f * u - 1.f);
    if constexpr (std::is_same_v<T, __half>) p[i] = __float2half_rn(x);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) p[i] = __float2bfloat16_rn(x);
    else p[i] = x;
  }
}

template <typename T> __device__ float as_float(T x) { return float(x); }
template <> __device__ float as_float<__half>(__half x) { return __half2float(x); }
template <> __device__ float as_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

// Max |a - b| over a strided (B,S,H,D) view `a` and contiguous `b`; NaN counts as +inf.
// Equal infinities (lse of fully masked rows) count as no error. Also counts the elements that
// differ at all (into *differ).
template <typename T>
__global__ void diff_kernel(const T* a, int64_t sb, int64_t ss, int64_t sh, const T* b,
                            int64_t S, int64_t H, int64_t D, int64_t n, unsigned* out,
                            unsigned long long* differ) {
  float mx = 0.f;
  unsigned long long count = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = i % D, h = (i / D) % H, s = (i / (D * H)) % S, bb = i / (D * H * S);
    const float x = as_float(a[bb * sb + s * ss + h * sh + d]), y = as_float(b[i]);
    float e = (x == y) ? 0.f : fabsf(x - y);
    if (isnan(e)) e = INFINITY;
    mx = fmaxf(mx, e);
    count += e != 0.f;
  }
  atomicMax(out, __float_as_uint(mx));  // non-negative floats order like their bits
  atomicAdd(differ, count);
}

template <typename T>
void launch_diff(const void* a, const int64_t* st, const void* b, const int64_t* shape,
                 unsigned* out, cudaStream_t s) {
  const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
  diff_kernel<T><<<512, 256, 0, s>>>(static_cast<const T*>(a), st[0], st[1], st[2],
                                     static_cast<const T*>(b), shape[1], shape[2], shape[3], n, out,
                                     reinterpret_cast<unsigned long long*>(out + 2));
}

// scratch: 4 words (max bits, pad, 64-bit count). *differ_out (optional): the fraction of
// elements that differ.
double max_diff(const void* a, DType dt, const int64_t* strides, const void* b,
                const int64_t* shape, unsigned* scratch, cudaStream_t s, double* differ_out = nullptr) {
  cudaMemsetAsync(scratch, 0, 4 * sizeof(unsigned), s);
  if (dt == DType::kFloat16) launch_diff<__half>(a, strides, b, shape, scratch, s);
  else if (dt == DType::kBFloat16) launch_diff<__nv_bfloat16>(a, strides, b, shape, scratch, s);
  else launch_diff<float>(a, strides, b, shape, scratch, s);
  unsigned words[4] = {0, 0, 0, 0};
  cudaMemcpyAsync(words, scratch, sizeof(words), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  float f;
  std::memcpy(&f, &words[0], 4);
  if (differ_out != nullptr) {
    unsigned long long count = 0;
    std::memcpy(&count, &words[2], 8);
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    *differ_out = n > 0 ? double(count) / double(n) : 0.0;
  }
  return f;
}

size_t elem_size(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }

}  // namespace

double default_atol(DType dt) { return dt == DType::kBFloat16 ? 1e-3 : 2e-4; }

void fill_random(void* ptr, DType dt, int64_t n, uint64_t seed, float mean, float half_range,
                 cudaStream_t s) {
  if (dt == DType::kFloat16) fill_kernel<<<1024, 256, 0, s>>>(static_cast<__half*>(ptr), n, seed, mean, half_range);
  else if (dt == DType::kBFloat16) fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(ptr), n, seed, mean, half_range);
  else fill_kernel<<<1024, 256, 0, s>>>(static_cast<float*>(ptr), n, seed, mean, half_range);
}

void poison(void* ptr, DType dt, int64_t n, cudaStream_t s) {
  // 0xFFFF is a NaN in both fp16 and bf16; 0xFFFFFFFF is a NaN in fp32.
  cudaMemsetAsync(ptr, 0xFF, size_t(n) * elem_size(dt), s);
}

Report check_against_reference(const ForwardArgs& args, cudaStream_t s) {
  Report r;
  detail::FwdParams p;
  bool empty = false;
  Status st = detail::validate_and_convert(args, &p, &empty);
  if (!st.ok() || empty) {
    r.message = st.ok() ? "empty problem" : st.message();
    r.pass = st.ok();
    return r;
  }
  const TensorRef& q = args.q;
  // out is (B, Sq, Hq, Dv): validated to be q's first three dims with v's head dim.
  const int64_t* out_shape = args.out.shape;
  const int64_t n = out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3];
  // Varlen: lse is (Hq, total_q); out rows outside every sequence are compared too, so the
  // callers' sequences must cover the packed rows (the references write nothing else).
  const int64_t n_lse = p.varlen() ? int64_t(p.hq) * p.total_q : int64_t(p.b) * p.hq * p.sq;
  void *ref = nullptr, *lowp = nullptr;
  float *lse_ref = nullptr, *lse_lowp = nullptr;
  unsigned* scratch = nullptr;
  bool ok = cudaMalloc(&ref, n * 2) == cudaSuccess && cudaMalloc(&lowp, n * 2) == cudaSuccess &&
            cudaMalloc(&lse_ref, n_lse * 4) == cudaSuccess &&
            cudaMalloc(&lse_lowp, n_lse * 4) == cudaSuccess &&
            cudaMalloc(&scratch, 4 * sizeof(unsigned)) == cudaSuccess;
  if (ok) {
    const TensorRef contig =
        make_contiguous(ref, q.dtype, out_shape[0], out_shape[1], out_shape[2], out_shape[3]);
    detail::FwdParams pr = p;
    pr.o = {ref, contig.stride[0], contig.stride[1], contig.stride[2]};
    pr.lse = lse_ref;
    detail::FwdParams pl = pr;
    pl.o.ptr = lowp;
    pl.lse = lse_lowp;
    ok = detail::reference_forward(pr, s).ok() && detail::reference_forward_lowp(pl, s).ok();
    if (ok) {
      const double atol = default_atol(q.dtype);
      r.out_err = max_diff(args.out.data, q.dtype, args.out.stride, ref, out_shape, scratch, s, &r.out_differ);
      r.out_lowp_err = max_diff(lowp, q.dtype, contig.stride, ref, out_shape, scratch, s, &r.out_lowp_differ);
      r.out_bound = 2 * r.out_lowp_err + atol;
      r.pass = r.out_err <= r.out_bound;
      if (args.lse != nullptr) {
        const int64_t lse_b = p.varlen() ? 1 : p.b, lse_s = p.varlen() ? p.total_q : p.sq;
        const int64_t lse_shape[4] = {lse_b, p.hq, lse_s, 1};
        const int64_t lse_strides[4] = {int64_t(p.hq) * lse_s, lse_s, 1, 1};
        r.lse_checked = true;
        r.lse_err = max_diff(args.lse, DType::kFloat32, lse_strides, lse_ref, lse_shape, scratch, s);
        r.lse_lowp_err = max_diff(lse_lowp, DType::kFloat32, lse_strides, lse_ref, lse_shape, scratch, s);
        r.lse_bound = 2 * r.lse_lowp_err + 1e-3;
        r.pass = r.pass && r.lse_err <= r.lse_bound;
      }
      if (!r.pass)
        r.message = "out err " + std::to_string(r.out_err) + " > bound " + std::to_string(r.out_bound) +
                    (r.lse_checked ? "; lse err " + std::to_string(r.lse_err) + " bound " +
                                         std::to_string(r.lse_bound) : "");
    }
  }
  const cudaError_t e = cudaGetLastError();
  if (!ok || e != cudaSuccess) {
    r.pass = false;
    r.message = std::string("reference check failed to run: ") + cudaGetErrorString(e);
  }
  cudaFree(ref); cudaFree(lowp); cudaFree(lse_ref); cudaFree(lse_lowp); cudaFree(scratch);
  return r;
}

}  // namespace flashattn::check
