// Dev harness, not a test: it calls flashattn::detail::sm90_forward directly, around the public API.
// Standalone check + timing of the sm90 family, for ablation builds of the kernels alone (no API
// layer, no CMake). The tests are tests/gpu (gtest, through the API); the yardsticks are
// bench/compare.py and bench/lib_ab.py. Build: tools/dev/build_sm90_standalone.sh. Usage:
//   sm90_standalone check            correctness sweep (awkward seqlens, GQA, causal, dtypes, lse)
//   sm90_standalone bench D causal bf16 [S...]   TFLOPS on the standard grid (B*S = 16k, H = 2048/D)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "api/backends.h"

using flashattn::detail::ElemType;
using flashattn::detail::FwdParams;

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

template <class T>
__device__ float to_f(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else return __bfloat162float(x);
}
template <class T>
__device__ T from_f(float x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}

__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return (uint32_t)x;
}
// Uniform in [-1, 1) + offset (non-zero mean, as the correctness rule asks).
template <class T>
__global__ void fill_random(T* p, size_t n, uint64_t seed, float offset) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = from_f<T>((hash32(i * 0x9E3779B97F4A7C15ull + seed) >> 8) * (2.f / 16777216.f) - 1.f + offset);
}

// Naive reference: one block per (query row, head, batch). lowp=true mimics attention in the input
// precision (P = exp(s - max) rounded to T before PV, output rounded to T).
template <class T>
__global__ void ref_attention(FwdParams p, float* out, float* lse, bool lowp) {
  extern __shared__ float sc[];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hk = h / p.h_ratio;
  const T* q = (const T*)p.q.ptr + p.q.offset(b, i, h);
  const int lim = p.causal ? (int)min((long long)p.sk, max(0LL, (long long)i + p.sk - p.sq + 1)) : p.sk;
  __shared__ float red[32];
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < p.sk; j += blockDim.x) {
    const T* k = (const T*)p.k.ptr + p.k.offset(b, j, hk);
    float s = 0.f;
    for (int d = 0; d < p.d; ++d) s += to_f(q[d]) * to_f(k[d]);
    s = j < lim ? s * p.scale : -INFINITY;
    sc[j] = s;
    mx = fmaxf(mx, s);
  }
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < (int)blockDim.x / 32; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < p.sk; j += blockDim.x) {
    float e = (mx == -INFINITY) ? 0.f : expf(sc[j] - mx);
    sum += e;
    sc[j] = lowp ? to_f(from_f<T>(e)) : e;
  }
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(~0u, sum, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < (int)blockDim.x / 32; ++w) sum += red[w];
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  const size_t orow = (((size_t)b * p.sq + i) * p.hq + h) * p.d;
  for (int d = threadIdx.x; d < p.d; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < lim; ++j) acc += sc[j] * to_f(((const T*)p.v.ptr)[p.v.offset(b, j, hk) + d]);
    float o = acc * inv;
    out[orow + d] = lowp ? to_f(from_f<T>(o)) : o;
  }
  if (threadIdx.x == 0) lse[((size_t)b * p.hq + h) * p.sq + i] = sum > 0.f ? mx + logf(sum) : -INFINITY;
}

template <class T>
__global__ void compare(const T* o, const float* ref, const float* lowp, size_t n, float* res) {
  // res[0] = max|o-ref|, res[1] = max|lowp-ref|, res[2] = #non-finite outputs
  float e = 0.f, el = 0.f, bad = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float v = to_f(o[i]);
    if (!isfinite(v)) bad += 1.f;
    else e = fmaxf(e, fabsf(v - ref[i]));
    el = fmaxf(el, fabsf(lowp[i] - ref[i]));
  }
  atomicMax((int*)&res[0], __float_as_int(e));
  atomicMax((int*)&res[1], __float_as_int(el));
  atomicAdd(&res[2], bad);
}

struct Case {
  int b, sq, sk, hq, hkv, d;
  bool causal, bf16, packed;
};

template <class T>
bool run_case(const Case& c, int warm_launches = 0) {
  FwdParams p;
  p.b = c.b; p.sq = c.sq; p.sk = c.sk; p.hq = c.hq; p.hkv = c.hkv; p.d = c.d; p.h_ratio = c.hq / c.hkv;
  p.scale = 1.f / std::sqrt((float)c.d);
  p.scale_log2 = p.scale * 1.4426950408889634f;
  p.causal = c.causal;
  p.dtype = c.bf16 ? ElemType::kBFloat16 : ElemType::kFloat16;
  const size_t nq = (size_t)c.b * c.sq * c.hq * c.d, nk = (size_t)c.b * c.sk * c.hkv * c.d;
  T *q, *k, *v, *o;
  float *lse, *ref, *reflse, *lowp, *lowplse, *res;
  // packed: q,k,v are slices of one (B, S, 3, H, D) buffer (requires sq == sk, hq == hkv).
  if (c.packed) {
    CK(cudaMalloc(&q, 3 * nq * sizeof(T)));
    k = q + c.hq * c.d; v = q + 2 * c.hq * c.d;
    p.q = p.k = p.v = {nullptr, 3LL * c.sq * c.hq * c.d, 3LL * c.hq * c.d, c.d};
    fill_random<T><<<512, 256>>>(q, 3 * nq, 11, 0.25f);
  } else {
    CK(cudaMalloc(&q, nq * sizeof(T)));
    CK(cudaMalloc(&k, nk * sizeof(T)));
    CK(cudaMalloc(&v, nk * sizeof(T)));
    p.q = {nullptr, (int64_t)c.sq * c.hq * c.d, (int64_t)c.hq * c.d, c.d};
    p.k = p.v = {nullptr, (int64_t)c.sk * c.hkv * c.d, (int64_t)c.hkv * c.d, c.d};
    fill_random<T><<<512, 256>>>(q, nq, 1, 0.25f);
    fill_random<T><<<512, 256>>>(k, nk, 2, 0.25f);
    fill_random<T><<<512, 256>>>(v, nk, 3, 0.25f);
  }
  CK(cudaMalloc(&o, nq * sizeof(T)));
  const size_t nl = (size_t)c.b * c.hq * c.sq;
  CK(cudaMalloc(&lse, nl * 4)); CK(cudaMalloc(&reflse, nl * 4)); CK(cudaMalloc(&lowplse, nl * 4));
  CK(cudaMalloc(&ref, nq * 4)); CK(cudaMalloc(&lowp, nq * 4)); CK(cudaMalloc(&res, 16));
  p.q.ptr = q; p.k.ptr = k; p.v.ptr = v; p.lse = lse;
  p.o = {o, (int64_t)c.sq * c.hq * c.d, (int64_t)c.hq * c.d, c.d};
  // Earlier launches cycle the dynamic scheduler's counter pool (each pair must self-reset).
  for (int i = 0; i < warm_launches; ++i) flashattn::detail::sm90_forward(p, nullptr);
  CK(cudaDeviceSynchronize());
  CK(cudaMemset(o, 0xff, nq * sizeof(T)));  // NaN poison
  CK(cudaMemset(lse, 0xff, nl * 4));
  CK(cudaMemset(res, 0, 16));
  flashattn::Status st = flashattn::detail::sm90_forward(p, nullptr);
  if (!st.ok()) { std::printf("sm90_forward failed: %s\n", st.message().c_str()); return false; }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const size_t sm = (size_t)c.sk * 4;
  CK(cudaFuncSetAttribute(ref_attention<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  ref_attention<T><<<dim3(c.sq, c.hq, c.b), 128, sm>>>(p, ref, reflse, false);
  ref_attention<T><<<dim3(c.sq, c.hq, c.b), 128, sm>>>(p, lowp, lowplse, true);
  compare<T><<<256, 256>>>(o, ref, lowp, nq, res);
  CK(cudaDeviceSynchronize());
  float r[3];
  CK(cudaMemcpy(r, res, 12, cudaMemcpyDeviceToHost));
  std::vector<float> hl(nl), hr(nl);
  CK(cudaMemcpy(hl.data(), lse, nl * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), reflse, nl * 4, cudaMemcpyDeviceToHost));
  float lerr = 0.f;
  int lbad = 0;
  for (size_t i = 0; i < nl; ++i) {
    if (std::isinf(hr[i])) { lbad += !(std::isinf(hl[i]) && hl[i] < 0); continue; }
    if (!std::isfinite(hl[i])) { ++lbad; continue; }
    lerr = std::max(lerr, std::fabs(hl[i] - hr[i]));
  }
  const float atol = c.bf16 ? 4e-3f : 5e-4f;
  const bool ok = r[2] == 0.f && r[0] <= 2.f * r[1] + atol && lbad == 0 && lerr <= 2e-3f;
  std::printf("%s b=%d sq=%d sk=%d hq=%d hkv=%d d=%d causal=%d %s%s  err=%.3g lowp=%.3g nonfinite=%g lse_err=%.3g lse_bad=%d\n",
              ok ? "PASS" : "FAIL", c.b, c.sq, c.sk, c.hq, c.hkv, c.d, c.causal, c.bf16 ? "bf16" : "fp16",
              c.packed ? " packed" : "", r[0], r[1], r[2], lerr, lbad);
  cudaFree(q);
  if (!c.packed) { cudaFree(k); cudaFree(v); }
  cudaFree(o); cudaFree(lse); cudaFree(reflse); cudaFree(lowplse); cudaFree(ref); cudaFree(lowp); cudaFree(res);
  return ok;
}

template <class T>
double bench(int b, int s, int h, int d, bool causal, int iters = 20) {
  FwdParams p;
  p.b = b; p.sq = p.sk = s; p.hq = p.hkv = h; p.d = d; p.h_ratio = 1;
  p.scale = 1.f / std::sqrt((float)d); p.scale_log2 = p.scale * 1.4426950408889634f; p.causal = causal;
  p.dtype = std::is_same_v<T, __half> ? ElemType::kFloat16 : ElemType::kBFloat16;
  const size_t n = (size_t)b * s * h * d;
  T *q, *k, *v, *o;
  CK(cudaMalloc(&q, n * 2)); CK(cudaMalloc(&k, n * 2)); CK(cudaMalloc(&v, n * 2)); CK(cudaMalloc(&o, n * 2));
  fill_random<T><<<512, 256>>>(q, n, 1, 0.25f); fill_random<T><<<512, 256>>>(k, n, 2, 0.25f);
  fill_random<T><<<512, 256>>>(v, n, 3, 0.25f);
  p.q = p.k = p.v = {nullptr, (int64_t)s * h * d, (int64_t)h * d, d};  // contiguous (B, S, H, D)
  p.q.ptr = q; p.k.ptr = k; p.v.ptr = v;
  p.o = {o, (int64_t)s * h * d, (int64_t)h * d, d}; p.lse = nullptr;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) flashattn::detail::sm90_forward(p, nullptr);
  std::vector<float> ts;
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(e0));
    flashattn::detail::sm90_forward(p, nullptr);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ts.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(ts.begin(), ts.end());
  const double ms = ts[ts.size() / 2];
  const double flops = 4.0 * b * h * (double)s * s * d * (causal ? 0.5 : 1.0);
  cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o);
  return flops / (ms * 1e-3) / 1e12;
}

int main(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "check")) {
    const bool quick = argc >= 3 && !std::strcmp(argv[2], "quick");
    std::vector<Case> cases;
    const int dims[] = {64, 128, 256};
    for (int d : dims)
      for (int bf = 0; bf < 2; ++bf)
        for (int causal = 0; causal < 2; ++causal) {
          cases.push_back({1, 1, 1, 2, 1, d, (bool)causal, (bool)bf, false});
          cases.push_back({2, 17, 17, 2, 2, d, (bool)causal, (bool)bf, false});
          cases.push_back({1, 113, 1000, 4, 1, d, (bool)causal, (bool)bf, false});
          cases.push_back({1, 1000, 113, 4, 2, d, (bool)causal, (bool)bf, false});
          if (!quick) cases.push_back({1, 4097, 4097, 2, 1, d, (bool)causal, (bool)bf, false});
          if (!quick) cases.push_back({2, 300, 300, 3, 3, d, (bool)causal, (bool)bf, true});
          // Many tiles per persistent CTA, including fully masked ones (causal, sq > sk).
          if (!quick) cases.push_back({4, 1000, 1000, 16, 16, d, (bool)causal, (bool)bf, false});
          if (!quick) cases.push_back({3, 2000, 300, 16, 4, d, (bool)causal, (bool)bf, false});
          if (!quick) cases.push_back({1, 3000, 500, 4, 2, d, (bool)causal, (bool)bf, false});
        }
    int fails = 0;
    for (const Case& c : cases) fails += !(c.bf16 ? run_case<__nv_bfloat16>(c) : run_case<__half>(c));
    // Counter-pool reuse: 600 launches before the checked one.
    fails += !run_case<__half>({2, 1500, 1500, 16, 8, 128, true, false, false}, 600);
    cases.emplace_back();
    std::printf("%d / %zu failed\n", fails, cases.size());
    return fails ? 1 : 0;
  }
  if (argc >= 5 && !std::strcmp(argv[1], "bench")) {
    const int d = std::atoi(argv[2]);
    const bool causal = std::atoi(argv[3]) != 0, bf16 = std::atoi(argv[4]) != 0;
    std::vector<int> seqs;
    for (int i = 5; i < argc; ++i) seqs.push_back(std::atoi(argv[i]));
    if (seqs.empty()) seqs = {512, 1024, 2048, 4096, 8192, 16384};
    for (int s : seqs) {
      const int b = 16384 / s, h = 2048 / d;
      const double tf = bf16 ? bench<__nv_bfloat16>(b, s, h, d, causal) : bench<__half>(b, s, h, d, causal);
      std::printf("ours d=%d causal=%d %s B=%d H=%d S=%d : %.1f TFLOPS\n", d, causal, bf16 ? "bf16" : "fp16", b, h, s, tf);
    }
    return 0;
  }
  std::printf("usage: %s check [quick] | bench D causal bf16 [S...]\n", argv[0]);
  return 1;
}
