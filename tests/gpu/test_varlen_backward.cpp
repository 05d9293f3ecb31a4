// The varlen backward (BackwardArgs' cu_seqlens fields) through the public API, per backend:
// dq, dk, dv of every sequence against the CPU fp64 backward under the correctness rule
// (bwd_check.h check_backward_varlen: the rule once over all sequences). Every case:
//  - fresh random inputs with a nonzero mean; sequences of lengths 0, 1, 17, 113, 1000, mixed
//    and very unequal, q and k lengths that differ (causal is bottom-right per sequence), a
//    sequence with queries but no keys (dq 0) and one with keys but no queries (dk = dv = 0);
//  - rows before cu_seqlens_*[0] and past cu_seqlens_*[num_seqs] of q, k, v, out and dout hold
//    NaN (and lse there too), so a kernel that lets a row outside the sequences reach a result
//    (even as P = 0 times it) fails;
//  - dq, dk, dv poisoned before the call: a row inside a sequence left unwritten fails the rule,
//    and every row outside the sequences must keep its poison bits.
// Deterministic mode: bitwise-equal gradients run after run and on a second stream. Calls
// without queries or keys zero exactly the rows inside the sequences.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bwd_check.h"
#include "deterministic_check.h"
#include "gpu_util.h"

namespace flashattn::testing {
namespace {

constexpr int kLead = 3;   // rows before the first sequence (cu_seqlens_*[0] = kLead)
constexpr int kTail = 37;  // rows past the last sequence

struct VarlenBwdCase {
  const char* lengths;
  std::vector<int> lq, lk;
  int hq, hkv, d;
  bool causal;
  DType dt;
  Backend backend;
};

std::string name(const VarlenBwdCase& c) {
  return std::string(backend_name(c.backend)) + "_" + c.lengths + "_d" + std::to_string(c.d) +
         (c.causal ? "_causal" : "_full") + (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") + "_h" + std::to_string(c.hq) +
         "x" + std::to_string(c.hkv);
}
void PrintTo(const VarlenBwdCase& c, std::ostream* os) { *os << name(c); }

struct Lengths {
  const char* name;
  std::vector<int> lq, lk;
};

std::vector<Lengths> length_sets() {
  std::vector<int> skew_q{1000}, skew_k{1000};  // one long sequence, many short ones
  for (int i = 1; i <= 20; ++i) {
    skew_q.push_back(i % 7 == 0 ? 0 : i * 7 % 61);
    skew_k.push_back(i % 9 == 0 ? 0 : i * 13 % 97);
  }
  return {
      // lengths 0, 1, 17, 113, 1000; (0, 5): keys without queries; (9, 0): queries without keys
      {"mixed", {0, 1, 17, 113, 1000, 0, 9}, {3, 1, 17, 113, 1000, 5, 0}},
      {"differ", {113, 1000, 17, 1}, {1000, 113, 1, 17}},  // Sq < Sk, Sq > Sk (rows without keys)
      {"skewed", skew_q, skew_k},
  };
}

std::vector<VarlenBwdCase> cases() {
  std::vector<VarlenBwdCase> cs;
  const std::vector<Lengths> sets = length_sets();
  // GQA ratios 1, 4, 8; head dims of the three kernels and 96 (zero-filled columns on 128's).
  const std::pair<int, int> heads[] = {{2, 2}, {8, 2}, {8, 1}};
  for (Backend be : {Backend::kSm90, Backend::kSm80, Backend::kReference, Backend::kAuto}) {
    int i = 0;
    for (int d : {64, 128, 256, 96})
      for (bool causal : {false, true}) {
        const Lengths& l = sets[i % 3];
        const auto [hq, hkv] = heads[(i / 3 + i) % 3];
        const DType dt = i % 2 ? DType::kBFloat16 : DType::kFloat16;
        ++i;
        cs.push_back({l.name, l.lq, l.lk, hq, hkv, d, causal, dt, be});
      }
  }
  return cs;
}

// Offsets starting at `lead` (rows before the first sequence belong to none).
std::vector<int> offsets(const std::vector<int>& len, int lead) {
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
  void fill(uint64_t seed) {
    check::fill_random(q_->ptr, dt, int64_t(rows_q) * hq * d, seed, 0.3f, 1.f, nullptr);
    check::fill_random(k_->ptr, dt, int64_t(rows_k) * hkv * d, seed + 1, 0.2f, 1.f, nullptr);
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

uint64_t seed_of(const VarlenBwdCase& c) { return 7919ull * c.d + 131ull * c.hq + c.hkv + (c.causal ? 3 : 0) + c.lq.size(); }

// Forward with the case's backend when it serves varlen, else the reference (lse and out are
// the backward's inputs either way).
void run_forward(const VarlenBwdBuffers& buf, bool causal, Backend backend) {
  ForwardArgs f = buf.fwd_args(causal);
  f.backend = backend;
  Backend chosen{};
  if (!resolve_backend(f, &chosen).ok()) f.backend = Backend::kReference;
  const Status s = forward(f, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
}

#define RESOLVE_OR_SKIP(args, chosen)                                                                        \
  do {                                                                                                       \
    const Status rs_ = resolve_backend(args, &(chosen));                                                     \
    if (rs_.code() == StatusCode::kNotSupported || rs_.message().find("compute capability") != std::string::npos) \
      GTEST_SKIP() << rs_.message();                                                                         \
    ASSERT_TRUE(rs_.ok()) << rs_.message();                                                                  \
  } while (0)

class VarlenBackward : public ::testing::TestWithParam<VarlenBwdCase> {};

TEST_P(VarlenBackward, MatchesFp64AndTouchesOnlyItsRows) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenBwdCase c = GetParam();
  VarlenBwdBuffers buf(c.lq, c.lk, c.hq, c.hkv, c.d, c.dt);
  const BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/false);
  Backend chosen{};
  RESOLVE_OR_SKIP(args, chosen);
  if (c.backend == Backend::kAuto) {
    EXPECT_NE(chosen, Backend::kReference) << "auto fell back to the reference";
  }
  buf.fill(seed_of(c));
  run_forward(buf, c.causal, c.backend);
  buf.poison_grads(nullptr);
  const Status s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const BwdReport r = check_backward_varlen(args, buf.cu_q, buf.cu_k);
  EXPECT_TRUE(r.pass) << backend_name(chosen) << ": " << r.message;
  EXPECT_EQ(buf.touched_outside(), 0) << "gradient rows outside every sequence were written";
}

INSTANTIATE_TEST_SUITE_P(Grid, VarlenBackward, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

class VarlenBackwardDeterministic : public ::testing::TestWithParam<VarlenBwdCase> {};

TEST_P(VarlenBackwardDeterministic, BitwiseAcrossRunsAndStreams) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenBwdCase c = GetParam();
  VarlenBwdBuffers buf(c.lq, c.lk, c.hq, c.hkv, c.d, c.dt);
  const BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/true);
  Backend chosen{};
  RESOLVE_OR_SKIP(args, chosen);
  buf.fill(seed_of(c) + 5);
  run_forward(buf, c.causal, c.backend);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_bitwise_deterministic(
      {/*runs=*/10, /*side_runs=*/1}, std::string(backend_name(chosen)) + ": ",
      [&](cudaStream_t st) { buf.poison_grads(st); }, [&](cudaStream_t st) { return backward(args, st); },
      [&] { return buf.grad_bytes(); },
      [&]() -> ::testing::AssertionResult {
        const BwdReport r = check_backward_varlen(args, buf.cu_q, buf.cu_k, /*budget=*/0);
        if (r.pass) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << r.message;
      });
}

// zero_outside_rows: the rows outside the sequences (poisoned before the call) become 0, the
// rows inside are bitwise those of the same deterministic call without it.
class VarlenBackwardZeroOutside : public ::testing::TestWithParam<VarlenBwdCase> {};

TEST_P(VarlenBackwardZeroOutside, ZeroesOutsideRowsAndKeepsTheRest) {
  FLASHATTN_REQUIRE_GPU();
  const VarlenBwdCase c = GetParam();
  VarlenBwdBuffers buf(c.lq, c.lk, c.hq, c.hkv, c.d, c.dt);
  BackwardArgs args = buf.args(c.causal, c.backend, /*deterministic=*/true);
  Backend chosen{};
  RESOLVE_OR_SKIP(args, chosen);
  buf.fill(seed_of(c) + 9);
  run_forward(buf, c.causal, c.backend);
  buf.poison_grads(nullptr);
  Status s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_GT(buf.outside_not(0), 0) << "the case must have rows outside its sequences";
  const std::vector<uint8_t> plain = buf.inside_grad_bytes();
  args.zero_outside_rows = true;
  buf.poison_grads(nullptr);
  s = backward(args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(buf.outside_not(0), 0) << backend_name(chosen) << ": outside rows not zeroed";
  EXPECT_TRUE(buf.inside_grad_bytes() == plain) << backend_name(chosen) << ": rows inside the sequences changed";
}

std::vector<VarlenBwdCase> deterministic_cases() {
  const std::vector<Lengths> sets = length_sets();
  std::vector<VarlenBwdCase> cs;
  for (Backend be : {Backend::kSm90, Backend::kSm80, Backend::kReference})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        cs.push_back({sets[d == 128 ? 2 : 0].name, sets[d == 128 ? 2 : 0].lq, sets[d == 128 ? 2 : 0].lk, 8, 2, d, causal,
                      causal ? DType::kBFloat16 : DType::kFloat16, be});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Grid, VarlenBackwardDeterministic, ::testing::ValuesIn(deterministic_cases()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Grid, VarlenBackwardZeroOutside, ::testing::ValuesIn(deterministic_cases()),
                         [](const auto& info) { return name(info.param); });

// No sequence has a query (every lq 0), or none has a key: nothing flows, and exactly the
// gradient rows inside the sequences are zeroed.
TEST(VarlenBackwardEmpty, ZeroesOnlyRowsInsideSequences) {
  FLASHATTN_REQUIRE_GPU();
  for (bool no_queries : {true, false}) {
    const std::vector<int> lq = no_queries ? std::vector<int>{0, 0, 0} : std::vector<int>{5, 0, 70};
    const std::vector<int> lk = no_queries ? std::vector<int>{4, 0, 130} : std::vector<int>{0, 0, 0};
    VarlenBwdBuffers buf(lq, lk, 4, 2, 64, DType::kBFloat16);
    buf.fill(11);
    // out / lse of such a call: out 0, lse -inf on the rows inside (what the forward gives).
    ASSERT_EQ(cudaMemset(buf.fwd_args(false).out.data, 0, size_t(buf.rows_q) * 4 * 64 * 2), cudaSuccess);
    const BackwardArgs args = buf.args(/*causal=*/false, Backend::kAuto, false);
    buf.poison_grads(nullptr);
    const Status s = backward(args);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(buf.touched_outside(), 0) << "no_queries " << no_queries;
    int64_t nonzero = 0;
    const std::pair<TensorRef, const std::vector<int>*> grads[] = {
        {args.dq, &buf.cu_q}, {args.dk, &buf.cu_k}, {args.dv, &buf.cu_k}};
    for (const auto& [t, cu] : grads) {
      const std::vector<double> h = to_host(t);
      const int64_t row = t.shape[2] * t.shape[3];
      for (int64_t e = int64_t(cu->front()) * row; e < int64_t(cu->back()) * row; ++e) nonzero += !(h[e] == 0.0);
    }
    EXPECT_EQ(nonzero, 0) << "no_queries " << no_queries << ": rows inside sequences must be 0";
    // With zero_outside_rows the rows outside are zeroed as well: every gradient element is 0.
    BackwardArgs all = args;
    all.zero_outside_rows = true;
    buf.poison_grads(nullptr);
    ASSERT_TRUE(backward(all).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(buf.outside_not(0), 0) << "no_queries " << no_queries << ": zero_outside_rows";
  }
}

}  // namespace
}  // namespace flashattn::testing
