// The buffers of one varlen backward case (GPU tests): packed (1, rows, H, D) q, k, v, out, dout,
// lse and gradients with rows before the first sequence and after the last one, NaN outside the
// sequences, poisoned gradients, and the views for ForwardArgs / BackwardArgs. Shared by
// test_varlen_backward.cpp and test_varlen_backward_features.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gpu_util.h"

namespace flashattn::testing {

constexpr int kLead = 3;   // rows before the first sequence (cu_seqlens_*[0] = kLead)
constexpr int kTail = 37;  // rows past the last sequence

// Offsets starting at `lead` (rows before the first sequence belong to none).
inline std::vector<int> offsets(const std::vector<int>& len, int lead) {
  std::vector<int> cu(len.size() + 1, lead);
  for (size_t i = 1; i < cu.size(); ++i) cu[i] = cu[i - 1] + len[i - 1];
  return cu;
}

// The buffers of one varlen case: packed (1, rows, H, D) tensors with kLead rows before the
// sequences and kTail after them.
struct VarlenBwdBuffers {
  VarlenBwdBuffers(const std::vector<int>& lq, const std::vector<int>& lk, int hq_, int hkv_, int d_, DType dt_)
      : cu_q(offsets(lq, kLead)), cu_k(offsets(lk, kLead)), hq(hq_), hkv(hkv_), d(d_), dt(dt_) {
    rows_q = cu_q.back() + kTail;
    rows_k = cu_k.back() + kTail;
    const size_t nq = size_t(rows_q) * hq * d, nk = size_t(rows_k) * hkv * d;
    q_ = std::make_unique<DeviceBuffer>(nq * 2);
    out_ = std::make_unique<DeviceBuffer>(nq * 2);
    dout_ = std::make_unique<DeviceBuffer>(nq * 2);
    dq_ = std::make_unique<DeviceBuffer>(nq * 2);
    k_ = std::make_unique<DeviceBuffer>(nk * 2);
    v_ = std::make_unique<DeviceBuffer>(nk * 2);
    dk_ = std::make_unique<DeviceBuffer>(nk * 2);
    dv_ = std::make_unique<DeviceBuffer>(nk * 2);
    lse_ = std::make_unique<DeviceBuffer>(size_t(hq) * rows_q * 4);
    dcu_q_ = std::make_unique<DeviceBuffer>(cu_q.size() * 4);
    dcu_k_ = std::make_unique<DeviceBuffer>(cu_k.size() * 4);
    EXPECT_EQ(cudaMemcpy(dcu_q_->ptr, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dcu_k_->ptr, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }

  // Random q, k, v, dout (nonzero means), NaN in their rows outside the sequences and in all of
  // out and lse (the forward then writes the rows inside).
  // wide: q and k of mean 0 and half-range 6, scores of magnitude ~30 for softcap cases.
  void fill(uint64_t seed, bool wide = false) {
    check::fill_random(q_->ptr, dt, int64_t(rows_q) * hq * d, seed, wide ? 0.f : 0.3f, wide ? 6.f : 1.f, nullptr);
    check::fill_random(k_->ptr, dt, int64_t(rows_k) * hkv * d, seed + 1, wide ? 0.f : 0.2f, wide ? 6.f : 1.f, nullptr);
    check::fill_random(v_->ptr, dt, int64_t(rows_k) * hkv * d, seed + 2, -0.4f, 1.f, nullptr);
    check::fill_random(dout_->ptr, dt, int64_t(rows_q) * hq * d, seed + 3, 0.25f, 1.f, nullptr);
    nan_outside(q_->ptr, cu_q, hq);
    nan_outside(dout_->ptr, cu_q, hq);
    // k / v: NaN only past the sequences; the rows before cu_seqlens_k[0] must be finite for the
    // forward that produces out and lse (include/flashattn/flashattn.h, ForwardArgs).
    nan_outside(k_->ptr, cu_k, hkv, /*lead=*/false);
    nan_outside(v_->ptr, cu_k, hkv, /*lead=*/false);
    check::poison(out_->ptr, dt, int64_t(rows_q) * hq * d, nullptr);
    check::poison(lse_->ptr, DType::kFloat32, int64_t(hq) * rows_q, nullptr);
  }
  void nan_outside(void* p, const std::vector<int>& cu, int h, bool lead = true) const {
    const size_t row = size_t(h) * d * 2;
    char* c = static_cast<char*>(p);
    const int rows = &cu == &cu_q ? rows_q : rows_k;
    if (lead) {
      EXPECT_EQ(cudaMemset(c, 0xFF, size_t(cu.front()) * row), cudaSuccess);
    }
    EXPECT_EQ(cudaMemset(c + size_t(cu.back()) * row, 0xFF, size_t(rows - cu.back()) * row), cudaSuccess);
  }
  void poison_grads(cudaStream_t st) {
    EXPECT_EQ(cudaMemsetAsync(dq_->ptr, 0xFF, dq_->bytes, st), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(dk_->ptr, 0xFF, dk_->bytes, st), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(dv_->ptr, 0xFF, dv_->bytes, st), cudaSuccess);
  }

  ForwardArgs fwd_args(bool causal) const {
    ForwardArgs a;
    a.q = make_contiguous(q_->ptr, dt, 1, rows_q, hq, d);
    a.k = make_contiguous(k_->ptr, dt, 1, rows_k, hkv, d);
    a.v = make_contiguous(v_->ptr, dt, 1, rows_k, hkv, d);
    a.out = make_contiguous(out_->ptr, dt, 1, rows_q, hq, d);
    a.lse = static_cast<float*>(lse_->ptr);
    a.causal = causal;
    a.cu_seqlens_q = static_cast<const int32_t*>(dcu_q_->ptr);
    a.cu_seqlens_k = static_cast<const int32_t*>(dcu_k_->ptr);
    a.num_seqs = int(cu_q.size()) - 1;
    a.max_seqlen_q = max_len(cu_q);
    a.max_seqlen_k = max_len(cu_k);
    return a;
  }
  BackwardArgs args(bool causal, Backend backend, bool deterministic) const {
    const ForwardArgs f = fwd_args(causal);
    BackwardArgs a;
    a.q = f.q; a.k = f.k; a.v = f.v; a.out = f.out; a.lse = f.lse;
    a.dout = make_contiguous(dout_->ptr, dt, 1, rows_q, hq, d);
    a.dq = make_contiguous(dq_->ptr, dt, 1, rows_q, hq, d);
    a.dk = make_contiguous(dk_->ptr, dt, 1, rows_k, hkv, d);
    a.dv = make_contiguous(dv_->ptr, dt, 1, rows_k, hkv, d);
    a.causal = causal;
    a.deterministic = deterministic;
    a.backend = backend;
    a.cu_seqlens_q = f.cu_seqlens_q;
    a.cu_seqlens_k = f.cu_seqlens_k;
    a.num_seqs = f.num_seqs;
    a.max_seqlen_q = f.max_seqlen_q;
    a.max_seqlen_k = f.max_seqlen_k;
    return a;
  }
  static int max_len(const std::vector<int>& cu) {
    int m = 0;
    for (size_t i = 1; i < cu.size(); ++i) m = std::max(m, cu[i] - cu[i - 1]);
    return m;
  }

  // Elements of rows outside the sequences that lost their 0xFFFF poison, over dq, dk, dv.
  int64_t touched_outside() const { return outside_not(0xFFFF); }
  // Elements of rows outside the sequences whose bits are not `bits`, over dq, dk, dv.
  int64_t outside_not(uint16_t bits) const {
    int64_t n = 0;
    const std::pair<const DeviceBuffer*, std::pair<const std::vector<int>*, int>> grads[] = {
        {dq_.get(), {&cu_q, hq}}, {dk_.get(), {&cu_k, hkv}}, {dv_.get(), {&cu_k, hkv}}};
    for (const auto& [buf, geo] : grads) {
      std::vector<uint16_t> h(buf->bytes / 2);
      EXPECT_EQ(cudaMemcpy(h.data(), buf->ptr, buf->bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      const size_t row = size_t(geo.second) * d;
      const size_t inside0 = size_t(geo.first->front()) * row, inside1 = size_t(geo.first->back()) * row;
      for (size_t e = 0; e < h.size(); ++e)
        if (e < inside0 || e >= inside1) n += h[e] != bits;
    }
    return n;
  }
  // The bytes of dq, dk, dv's rows from the first sequence's start to the last one's end.
  std::vector<uint8_t> inside_grad_bytes() const {
    std::vector<uint8_t> all;
    const std::pair<const DeviceBuffer*, std::pair<const std::vector<int>*, int>> grads[] = {
        {dq_.get(), {&cu_q, hq}}, {dk_.get(), {&cu_k, hkv}}, {dv_.get(), {&cu_k, hkv}}};
    for (const auto& [buf, geo] : grads) {
      const size_t row = size_t(geo.second) * d * 2;
      std::vector<uint8_t> h(size_t(geo.first->back() - geo.first->front()) * row);
      EXPECT_EQ(cudaMemcpy(h.data(), static_cast<const char*>(buf->ptr) + size_t(geo.first->front()) * row, h.size(),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      all.insert(all.end(), h.begin(), h.end());
    }
    return all;
  }
  std::vector<uint8_t> grad_bytes() const {
    std::vector<uint8_t> all;
    for (const DeviceBuffer* b : {dq_.get(), dk_.get(), dv_.get()}) {
      std::vector<uint8_t> h(b->bytes);
      EXPECT_EQ(cudaMemcpy(h.data(), b->ptr, b->bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      all.insert(all.end(), h.begin(), h.end());
    }
    return all;
  }

  std::vector<int> cu_q, cu_k;
  int hq, hkv, d;
  DType dt;
  int rows_q = 0, rows_k = 0;

 private:
  std::unique_ptr<DeviceBuffer> q_, k_, v_, out_, dout_, dq_, dk_, dv_, lse_, dcu_q_, dcu_k_;
};

}  // namespace flashattn::testing
