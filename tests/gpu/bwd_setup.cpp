#include "bwd_setup.h"

#include "reference/device_check.h"

namespace flashattn::testing {
namespace {

// Slice `i` of a packed (B, S, 3, H, D) buffer: heads of one slice are adjacent, rows are
// 3 * H * D apart.
TensorRef packed_slice(void* base, DType dt, int b, int s, int h, int d, int i) {
  TensorRef t = make_contiguous(static_cast<char*>(base) + int64_t(i) * h * d * 2, dt, b, s, h, d);
  t.stride[1] = 3 * int64_t(h) * d;
  t.stride[0] = t.stride[1] * s;
  return t;
}

std::unique_ptr<DeviceBuffer> alloc16(int64_t elems) {
  return std::make_unique<DeviceBuffer>(size_t(elems) * 2);
}

void append_bytes(std::vector<uint8_t>* out, const void* dev, size_t bytes) {
  const size_t at = out->size();
  out->resize(at + bytes);
  EXPECT_EQ(cudaMemcpy(out->data() + at, dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

}  // namespace

std::string name(const BwdShape& c) {
  return "b" + std::to_string(c.b) + "_sq" + std::to_string(c.sq) + "_sk" + std::to_string(c.sk) +
         "_h" + std::to_string(c.hq) + "x" + std::to_string(c.hkv) + "_d" + std::to_string(c.d) +
         (c.dv ? "v" + std::to_string(c.dv) : "") + (c.causal ? "_causal" : "") + (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") +
         (c.packed_qkv ? "_packedqkv" : "") + (c.packed_grad ? "_packedgrad" : "") +
         (c.strided_dout ? "_strideddout" : "");
}

BwdBuffers::BwdBuffers(const BwdShape& s) : shape(s) {
  const DType dt = s.dt;
  if ((s.packed_qkv || s.packed_grad) && (s.sq != s.sk || s.hq != s.hkv || s.vd() != s.d))
    ADD_FAILURE() << "packed layouts need sq == sk, hq == hkv and dv == d: " << name(s);
  if (s.packed_qkv) {
    qkv_ = alloc16(3 * n_q());
    q = packed_slice(qkv_->ptr, dt, s.b, s.sq, s.hq, s.d, 0);
    k = packed_slice(qkv_->ptr, dt, s.b, s.sk, s.hkv, s.d, 1);
    v = packed_slice(qkv_->ptr, dt, s.b, s.sk, s.hkv, s.d, 2);
  } else {
    q_ = alloc16(n_q());
    k_ = alloc16(n_kv());
    v_ = alloc16(n_v());
    q = make_contiguous(q_->ptr, dt, s.b, s.sq, s.hq, s.d);
    k = make_contiguous(k_->ptr, dt, s.b, s.sk, s.hkv, s.d);
    v = make_contiguous(v_->ptr, dt, s.b, s.sk, s.hkv, s.vd());
  }
  dout_ = alloc16(s.strided_dout ? 2 * n_o() : n_o());
  dout = make_contiguous(dout_->ptr, dt, s.b, s.sq, s.hq, s.vd());
  if (s.strided_dout) {
    dout.stride[2] = 2 * int64_t(s.vd());
    dout.stride[1] = dout.stride[2] * s.hq;
    dout.stride[0] = dout.stride[1] * s.sq;
  }
  out_ = alloc16(n_o());
  out = make_contiguous(out_->ptr, dt, s.b, s.sq, s.hq, s.vd());
  lse_ = std::make_unique<DeviceBuffer>(size_t(s.b) * s.hq * s.sq * sizeof(float));
  lse = static_cast<float*>(lse_->ptr);
  if (s.packed_grad) {
    grad_ = alloc16(3 * n_q());
    dq = packed_slice(grad_->ptr, dt, s.b, s.sq, s.hq, s.d, 0);
    dk = packed_slice(grad_->ptr, dt, s.b, s.sk, s.hkv, s.d, 1);
    dv = packed_slice(grad_->ptr, dt, s.b, s.sk, s.hkv, s.d, 2);
  } else {
    dq_ = alloc16(n_q());
    dk_ = alloc16(n_kv());
    dv_ = alloc16(n_v());
    dq = make_contiguous(dq_->ptr, dt, s.b, s.sq, s.hq, s.d);
    dk = make_contiguous(dk_->ptr, dt, s.b, s.sk, s.hkv, s.d);
    dv = make_contiguous(dv_->ptr, dt, s.b, s.sk, s.hkv, s.vd());
  }
}

void BwdBuffers::fill(uint64_t seed, cudaStream_t st) {
  // Uniform with a standard deviation of about 1 around 0.5.
  constexpr float kMean = 0.5f, kHalfRange = 1.7f;
  const DType dt = shape.dt;
  if (shape.packed_qkv) {
    check::fill_random(qkv_->ptr, dt, 3 * n_q(), seed, kMean, kHalfRange, st);
  } else {
    check::fill_random(q_->ptr, dt, n_q(), seed, kMean, kHalfRange, st);
    check::fill_random(k_->ptr, dt, n_kv(), seed + 1, kMean, kHalfRange, st);
    check::fill_random(v_->ptr, dt, n_v(), seed + 2, kMean, kHalfRange, st);
  }
  if (shape.strided_dout) {
    check::poison(dout_->ptr, dt, 2 * n_o(), st);
    if (n_o() > 0) {
      DeviceBuffer dense(size_t(n_o()) * 2);
      check::fill_random(dense.ptr, dt, n_o(), seed + 3, kMean, kHalfRange, st);
      const size_t row = size_t(shape.vd()) * 2;
      EXPECT_EQ(cudaMemcpy2DAsync(dout.data, 2 * row, dense.ptr, row, row,
                                  size_t(n_o() / shape.vd()), cudaMemcpyDeviceToDevice, st),
                cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);  // before `dense` is freed
    }
  } else {
    check::fill_random(dout_->ptr, dt, n_o(), seed + 3, kMean, kHalfRange, st);
  }
  // A forward with Sk = 0 writes nothing: out and lse then hold zeros, not stale memory.
  cudaMemsetAsync(out_->ptr, 0, out_->bytes, st);
  cudaMemsetAsync(lse_->ptr, 0, lse_->bytes, st);
}

Status BwdBuffers::forward(Backend backend, cudaStream_t st, Backend* used) {
  ForwardArgs f;
  f.q = q;
  f.k = k;
  f.v = v;
  f.out = out;
  f.lse = lse;
  f.causal = shape.causal;
  f.backend = backend;
  Backend chosen = Backend::kReference;
  if (backend == Backend::kReference || !resolve_backend(f, &chosen).ok())
    f.backend = Backend::kReference;
  *used = f.backend;
  return flashattn::forward(f, st);
}

void BwdBuffers::poison_grads(cudaStream_t st) {
  if (shape.packed_grad) {
    check::poison(grad_->ptr, shape.dt, 3 * n_q(), st);
  } else {
    check::poison(dq_->ptr, shape.dt, n_q(), st);
    check::poison(dk_->ptr, shape.dt, n_kv(), st);
    check::poison(dv_->ptr, shape.dt, n_v(), st);
  }
}

BackwardArgs BwdBuffers::args(Backend backend, bool deterministic) const {
  BackwardArgs a;
  a.dout = dout;
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.lse = lse;
  a.dq = dq;
  a.dk = dk;
  a.dv = dv;
  a.causal = shape.causal;
  a.deterministic = deterministic;
  a.backend = backend;
  return a;
}

std::vector<uint8_t> BwdBuffers::grad_bytes() const {
  std::vector<uint8_t> bytes;
  if (shape.packed_grad) {
    append_bytes(&bytes, grad_->ptr, size_t(3 * n_q()) * 2);
  } else {
    append_bytes(&bytes, dq_->ptr, size_t(n_q()) * 2);
    append_bytes(&bytes, dk_->ptr, size_t(n_kv()) * 2);
    append_bytes(&bytes, dv_->ptr, size_t(n_v()) * 2);
  }
  return bytes;
}

}  // namespace flashattn::testing
