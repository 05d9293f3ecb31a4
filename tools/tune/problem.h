// Inputs of one attention call for flashattn-sm80-tune's modes (sm80_tune.cpp, bwd_tune.cpp):
// a shape and its device tensors, randomized with an offset mean.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "api/validate.h"
#include "flashattn/flashattn.h"
#include "reference/device_check.h"

namespace flashattn::tune {

struct Shape {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  DType dt;
  int dv = 0;  // v/out head dim; 0: d
  int d_v() const { return dv > 0 ? dv : d; }
};

inline const char* dtype_name(DType dt) { return dt == DType::kBFloat16 ? "bf16" : "fp16"; }

inline std::string str(const Shape& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "b%d sq%d sk%d hq%d hkv%d d%d", s.b, s.sq, s.sk, s.hq, s.hkv, s.d);
  std::string r = buf;
  if (s.d_v() != s.d) r += " dv" + std::to_string(s.d_v());
  return r + (s.causal ? " causal " : " full ") + dtype_name(s.dt);
}

// Device tensors for one shape, freshly randomized (offset mean) and outputs poisoned.
struct Problem {
  Shape s;
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* lse = nullptr;
  ForwardArgs args;
  detail::FwdParams p;
  bool ok = false;

  explicit Problem(const Shape& sh, uint64_t seed) : s(sh) {
    const int64_t nq = int64_t(s.b) * s.sq * s.hq * s.d, nk = int64_t(s.b) * s.sk * s.hkv * s.d;
    const int64_t nv = int64_t(s.b) * s.sk * s.hkv * s.d_v(), no = int64_t(s.b) * s.sq * s.hq * s.d_v();
    ok = cudaMalloc(&q, nq * 2) == cudaSuccess && cudaMalloc(&k, nk * 2) == cudaSuccess &&
         cudaMalloc(&v, nv * 2) == cudaSuccess && cudaMalloc(&o, no * 2) == cudaSuccess &&
         cudaMalloc(&lse, int64_t(s.b) * s.hq * s.sq * 4) == cudaSuccess;
    if (!ok) return;
    check::fill_random(q, s.dt, nq, seed * 3 + 1, 0.3f, 1.0f, nullptr);
    check::fill_random(k, s.dt, nk, seed * 3 + 2, 0.2f, 1.0f, nullptr);
    check::fill_random(v, s.dt, nv, seed * 3 + 3, -0.4f, 1.5f, nullptr);
    args.q = make_contiguous(q, s.dt, s.b, s.sq, s.hq, s.d);
    args.k = make_contiguous(k, s.dt, s.b, s.sk, s.hkv, s.d);
    args.v = make_contiguous(v, s.dt, s.b, s.sk, s.hkv, s.d_v());
    args.out = make_contiguous(o, s.dt, s.b, s.sq, s.hq, s.d_v());
    args.lse = lse;
    args.causal = s.causal;
    args.backend = Backend::kSm80;
    bool empty = false;
    ok = detail::validate_and_convert(args, &p, &empty).ok() && !empty;
  }
  ~Problem() {
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(lse);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
  void poison() {
    check::poison(o, s.dt, int64_t(s.b) * s.sq * s.hq * s.d_v(), nullptr);
    check::poison(lse, DType::kFloat32, int64_t(s.b) * s.hq * s.sq, nullptr);
  }
};

}  // namespace flashattn::tune
