// flashattn-bench: one forward configuration through the public API, timed with CUDA events.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "bench_core.h"
#include "reference/device_check.h"

using namespace flashattn;

namespace {

int cuda_fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "flashattn-bench: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Options opt;
  std::string msg;
  const int rc = bench::parse_options(argc, argv, &opt, &msg);
  if (rc >= 0) {
    std::fputs(msg.c_str(), rc == 0 ? stdout : stderr);
    std::fputs("\n", rc == 0 ? stdout : stderr);
    return rc;
  }

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "flashattn-bench: needs an NVIDIA GPU of compute capability 8.0 or newer; none found\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major < 8) {
    std::fprintf(stderr, "flashattn-bench: needs an NVIDIA GPU of compute capability 8.0 or newer; %s is %d.%d\n",
                 prop.name, prop.major, prop.minor);
    return 1;
  }

  const DType dt = bench::dtype_of(opt);
  const int64_t nq = int64_t(opt.batch) * opt.seqlen * opt.heads * opt.hdim;
  const int64_t nkv = int64_t(opt.batch) * opt.kv_seqlen() * opt.kv_heads() * opt.hdim;
  const int64_t nlse = int64_t(opt.batch) * opt.heads * opt.seqlen;
  void *q, *k, *v, *o;
  float* lse;
  cudaError_t e;
  if ((e = cudaMalloc(&q, nq * 2)) || (e = cudaMalloc(&k, nkv * 2)) || (e = cudaMalloc(&v, nkv * 2)) ||
      (e = cudaMalloc(&o, nq * 2)) || (e = cudaMalloc(reinterpret_cast<void**>(&lse), nlse * 4)))
    return cuda_fail("allocation", e);
  // Random, offset from zero mean: zeros or symmetric data hide masking and scaling bugs.
  check::fill_random(q, dt, nq, 1, 0.1f, 1.0f, nullptr);
  check::fill_random(k, dt, nkv, 2, 0.1f, 1.0f, nullptr);
  check::fill_random(v, dt, nkv, 3, 0.2f, 1.0f, nullptr);

  ForwardArgs a;
  a.q = make_contiguous(q, dt, opt.batch, opt.seqlen, opt.heads, opt.hdim);
  a.k = make_contiguous(k, dt, opt.batch, opt.kv_seqlen(), opt.kv_heads(), opt.hdim);
  a.v = make_contiguous(v, dt, opt.batch, opt.kv_seqlen(), opt.kv_heads(), opt.hdim);
  a.out = make_contiguous(o, dt, opt.batch, opt.seqlen, opt.heads, opt.hdim);
  a.lse = lse;
  a.causal = opt.causal;
  a.backend = bench::backend_of(opt);

  Backend chosen = Backend::kReference;
  Status st = resolve_backend(a, &chosen);
  if (!st.ok()) {
    std::fprintf(stderr, "flashattn-bench: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("Device: %s (cc %d.%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  std::fputs(bench::format_config(opt, backend_name(chosen)).c_str(), stdout);

  bench::Result res;
  res.backend = backend_name(chosen);
  if (opt.check) {
    check::poison(o, dt, nq, nullptr);
    check::poison(lse, DType::kFloat32, nlse, nullptr);
    st = forward(a);
    if (!st.ok()) {
      std::fprintf(stderr, "flashattn-bench: %s\n", st.message().c_str());
      return 1;
    }
    const check::Report r = check::check_against_reference(a, nullptr);
    res.checked = true;
    res.check_passed = r.pass;
    res.max_err = r.out_err;
    res.bound = r.out_bound;
    std::printf("Check vs reference:        %s (max|out-ref| %.3e, bound %.3e; lse err %.3e, bound %.3e)\n",
                r.pass ? "PASS" : "FAIL", r.out_err, r.out_bound, r.lse_err, r.lse_bound);
    if (!r.pass) {
      std::fprintf(stderr, "flashattn-bench: check failed: %s\n", r.message.c_str());
      return 1;
    }
  }

  for (int i = 0; i < opt.warmup; ++i) {
    if (!(st = forward(a)).ok()) {
      std::fprintf(stderr, "flashattn-bench: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::vector<cudaEvent_t> ev(opt.iters + 1);
  for (auto& x : ev) cudaEventCreate(&x);
  cudaEventRecord(ev[0]);
  for (int i = 0; i < opt.iters; ++i) {
    forward(a);
    cudaEventRecord(ev[i + 1]);
  }
  if ((e = cudaEventSynchronize(ev[opt.iters])) != cudaSuccess) return cuda_fail("timed loop", e);
  std::vector<float> ms(opt.iters);
  float total_ms = 0;
  for (int i = 0; i < opt.iters; ++i) cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]);
  cudaEventElapsedTime(&total_ms, ev[0], ev[opt.iters]);
  std::sort(ms.begin(), ms.end());

  const double flops = bench::forward_flops(opt), bytes = bench::forward_bytes(opt, true);
  res.total_seconds = total_ms / 1e3;
  res.avg_ms = total_ms / opt.iters;
  res.median_ms = ms[ms.size() / 2];
  res.tflops = flops / (res.avg_ms * 1e-3) / 1e12;
  res.gbps = bytes / (res.avg_ms * 1e-3) / 1e9;
  std::fputs(bench::format_report(res.total_seconds, opt.iters, flops, bytes).c_str(), stdout);
  std::printf("Median Time Per Step:      %.3f ms (%.2f TFLOPS)\n", res.median_ms,
              flops / (res.median_ms * 1e-3) / 1e12);
  if (!opt.json.empty()) {
    std::ofstream f(opt.json);
    f << bench::to_json(opt, res) << "\n";
    if (!f) {
      std::fprintf(stderr, "flashattn-bench: --json: cannot write %s\n", opt.json.c_str());
      return 1;
    }
  }
  for (auto& x : ev) cudaEventDestroy(x);
  cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(lse);
  return 0;
}
