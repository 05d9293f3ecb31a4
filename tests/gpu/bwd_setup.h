// Device buffers of one backward test case in the layouts the API must accept: q/k/v separate
// or slices of one packed buffer, dq/dk/dv likewise, dout contiguous or the first half of a
// wider buffer. The views are public so a test can hand them to the API and to the checks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu_util.h"

namespace flashattn::testing {

struct BwdShape {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  DType dt;
  bool packed_qkv = false;    // q, k, v: slices of one (B, S, 3, H, D) buffer (sq == sk, hq == hkv)
  bool packed_grad = false;   // dq, dk, dv: slices of one (B, S, 3, H, D) buffer (same condition)
  bool strided_dout = false;  // dout: the first half of each head of a (B, Sq, Hq, 2Dv) buffer
  int dv = 0;                 // v's (and out's, dout's) head dim; 0: d. Packed layouts need dv == d
  int vd() const { return dv ? dv : d; }
};

std::string name(const BwdShape& s);

class BwdBuffers {
 public:
  explicit BwdBuffers(const BwdShape& s);

  // Random q, k, v, dout with a nonzero mean (so rowsum(dO * O) is large and a kernel that
  // mishandles it cannot pass); a strided dout's unused halves hold NaN, so reading them shows.
  void fill(uint64_t seed, cudaStream_t st);
  // Writes out and lse with the forward of `backend` when that backend serves the shape, else
  // with the reference forward; *used names the one that ran.
  Status forward(Backend backend, cudaStream_t st, Backend* used);
  // NaN into every gradient element (an element a backward leaves unwritten cannot pass).
  void poison_grads(cudaStream_t st);
  BackwardArgs args(Backend backend, bool deterministic) const;
  // The gradients' bytes (the packed buffer, or dq, dk, dv in turn), for bitwise comparison.
  std::vector<uint8_t> grad_bytes() const;

  BwdShape shape;
  TensorRef q, k, v, dout, out, dq, dk, dv;
  float* lse = nullptr;

 private:
  int64_t n_q() const { return int64_t(shape.b) * shape.sq * shape.hq * shape.d; }
  int64_t n_kv() const { return int64_t(shape.b) * shape.sk * shape.hkv * shape.d; }
  int64_t n_o() const { return int64_t(shape.b) * shape.sq * shape.hq * shape.vd(); }   // out, dout
  int64_t n_v() const { return int64_t(shape.b) * shape.sk * shape.hkv * shape.vd(); }  // v, dv
  std::unique_ptr<DeviceBuffer> qkv_, q_, k_, v_, dout_, out_, lse_, grad_, dq_, dk_, dv_;
};

}  // namespace flashattn::testing
