// sm80 forward on packed variable-length batches (FwdParams with cu_q / cu_k, issue 16), called
// through detail::sm80_forward (the public API has no varlen entry yet) after sm80_supports.
// Checked against the CPU references of the packed batch (reference/cpu_reference_inference.h)
// under the correctness rule: max|out - ref| <= 2 max|out_lowp - ref| + atol over every row of
// every sequence; lse within 1e-3 of the fp64 lse (no input-precision lse exists to scale the
// bound by), and exactly -inf with out exactly 0 on rows that see no key. Leak checks:
//  - q, k and v carry extra packed rows past cu_q[B] / cu_k[B] (total_q / total_k count them)
//    holding NaN: a kernel that reads past a sequence's last key row into its tile (rather than
//    zero-filling it), or lets such a V row meet P = 0, makes the last sequence NaN;
//  - out and lse are poisoned with NaN before the call: an unwritten row of any sequence fails
//    the rule, and the rows past cu_q[B] (of out and of every head's lse) must keep the poison.
// Sequences: B = 5 with a zero-length query side, a zero-length key side, length 1, ~1000 and
// 257, unequal q and k lengths both ways (causal: rows and whole blocks without keys), GQA 8:2.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/backends.h"
#include "common/params.h"
#include "gpu_util.h"
#include "reference/cpu_reference.h"
#include "reference/cpu_reference_inference.h"
#include "sm80/registry.h"
#include "sm80/tuned_table.h"
#include "sm80/varlen.h"

namespace flashattn::testing {
namespace {

constexpr int kExtraRows = 9;  // packed rows past cu[B] in q/k/v/out (NaN in the inputs)
constexpr int kHq = 8, kHkv = 2;

struct VarlenCase {
  int d, dv;
  bool causal;
  DType dt;
  std::vector<int> len_q, len_k;
  const char* lens_name;
};

std::string name(const VarlenCase& c) {
  return "d" + std::to_string(c.d) + "v" + std::to_string(c.dv) + (c.causal ? "_causal" : "_full") +
         (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") + "_" + c.lens_name;
}

void PrintTo(const VarlenCase& c, std::ostream* os) { *os << name(c); }

std::vector<VarlenCase> cases() {
  // (q, k) per sequence: (1, 1); (0, 5): no query rows; (1000, 1023): several blocks, partial
  // last ones, sq < sk; (257, 0): no keys (out 0, lse -inf); (300, 77): sq > sk (causal: rows
  // and query blocks without keys).
  const std::vector<int> q1{1, 0, 1000, 257, 300}, k1{1, 5, 1023, 0, 77};
  // Block-boundary lengths: exactly 64 and 128 rows, one past, and a zero-length last sequence
  // (the one next to the NaN rows past cu[B]).
  const std::vector<int> q2{64, 129, 17, 128, 0}, k2{128, 65, 200, 64, 0};
  std::vector<VarlenCase> cs;
  for (auto [d, dv] : {std::pair{64, 64}, {128, 128}, {192, 128}, {80, 80}})
    for (bool causal : {false, true})
      for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
        cs.push_back({d, dv, causal, dt, q1, k1, "mixed"});
        cs.push_back({d, dv, causal, dt, q2, k2, "edges"});
      }
  return cs;
}

std::vector<int32_t> offsets(const std::vector<int>& lens) {
  std::vector<int32_t> cu{0};
  for (int l : lens) cu.push_back(cu.back() + l);
  return cu;
}

// rows x width 16-bit values of a device buffer, as doubles.
std::vector<double> download(const void* ptr, DType dt, int64_t n) {
  std::vector<uint16_t> raw(static_cast<size_t>(n));
  EXPECT_EQ(cudaMemcpy(raw.data(), ptr, raw.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = half_bits_to_double(raw[i], dt);
  return out;
}

class Sm80Varlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(Sm80Varlen, MatchesReferenceAndLeaksNothing) {
  FLASHATTN_REQUIRE_GPU();
  if (!detail::sm80_built()) GTEST_SKIP() << "sm80 family not built";
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "sm80 kernels need compute capability 8.0";

  const VarlenCase c = GetParam();
  const int b = static_cast<int>(c.len_q.size());
  const std::vector<int32_t> cu_q = offsets(c.len_q), cu_k = offsets(c.len_k);
  const int used_q = cu_q[b], used_k = cu_k[b];
  const int total_q = used_q + kExtraRows, total_k = used_k + kExtraRows;
  const int max_q = *std::max_element(c.len_q.begin(), c.len_q.end());
  const int max_k = *std::max_element(c.len_k.begin(), c.len_k.end());
  const int64_t n_q = int64_t(total_q) * kHq * c.d, n_k = int64_t(total_k) * kHkv * c.d;
  const int64_t n_v = int64_t(total_k) * kHkv * c.dv, n_o = int64_t(total_q) * kHq * c.dv;
  const int64_t n_lse = int64_t(kHq) * total_q;

  DeviceBuffer q(size_t(n_q) * 2), k(size_t(n_k) * 2), v(size_t(n_v) * 2), o(size_t(n_o) * 2),
      lse(size_t(n_lse) * 4), dcu_q(size_t(b + 1) * 4), dcu_k(size_t(b + 1) * 4);
  check::fill_random(q.ptr, c.dt, n_q, 21 + c.d, 0.3f, 1.f, nullptr);
  check::fill_random(k.ptr, c.dt, n_k, 22 + c.d, 0.2f, 1.f, nullptr);
  check::fill_random(v.ptr, c.dt, n_v, 23 + c.dv, -0.4f, 1.5f, nullptr);
  // NaN (0xFFFF in both 16-bit types) in the packed rows past cu_q[B] / cu_k[B].
  auto nan_rows = [&](void* ptr, int64_t first_row, int64_t row_elems, int rows) {
    ASSERT_EQ(cudaMemset(static_cast<char*>(ptr) + first_row * row_elems * 2, 0xFF, size_t(rows) * row_elems * 2),
              cudaSuccess);
  };
  nan_rows(q.ptr, used_q, int64_t(kHq) * c.d, kExtraRows);
  nan_rows(k.ptr, used_k, int64_t(kHkv) * c.d, kExtraRows);
  nan_rows(v.ptr, used_k, int64_t(kHkv) * c.dv, kExtraRows);
  check::poison(o.ptr, c.dt, n_o, nullptr);
  check::poison(lse.ptr, DType::kFloat32, n_lse, nullptr);
  ASSERT_EQ(cudaMemcpy(dcu_q.ptr, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dcu_k.ptr, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);

  detail::FwdParams p;
  p.q = {q.ptr, 0, int64_t(kHq) * c.d, c.d};
  p.k = {k.ptr, 0, int64_t(kHkv) * c.d, c.d};
  p.v = {v.ptr, 0, int64_t(kHkv) * c.dv, c.dv};
  p.o = {o.ptr, 0, int64_t(kHq) * c.dv, c.dv};
  p.lse = static_cast<float*>(lse.ptr);
  p.b = b;
  p.sq = max_q;
  p.sk = max_k;
  p.hq = kHq;
  p.hkv = kHkv;
  p.h_ratio = kHq / kHkv;
  p.d = c.d;
  p.d_v = c.dv;
  p.scale = static_cast<float>(1.0 / std::sqrt(double(c.d)));
  p.scale_log2 = static_cast<float>(p.scale * 1.4426950408889634);
  p.causal = c.causal;
  p.dtype = c.dt == DType::kBFloat16 ? detail::ElemType::kBFloat16 : detail::ElemType::kFloat16;
  p.cu_q = static_cast<const int*>(dcu_q.ptr);
  p.cu_k = static_cast<const int*>(dcu_k.ptr);
  p.total_q = total_q;
  p.total_k = total_k;

  const Status sup = detail::sm80_supports(p);
  ASSERT_TRUE(sup.ok()) << sup.message();
  const Status st = detail::sm80_forward(p, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // References over the packed rows (the NaN rows past cu[B] included: they must not be read).
  const std::vector<double> hq = download(q.ptr, c.dt, n_q), hk = download(k.ptr, c.dt, n_k),
                            hv = download(v.ptr, c.dt, n_v), ho = download(o.ptr, c.dt, n_o);
  std::vector<float> hlse(static_cast<size_t>(n_lse));
  ASSERT_EQ(cudaMemcpy(hlse.data(), lse.ptr, hlse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ref::VarlenProblem pr;
  pr.b = b;
  pr.hq = kHq;
  pr.hkv = kHkv;
  pr.d = c.d;
  pr.dv = c.dv;
  pr.causal = c.causal;
  const int64_t used_o = int64_t(used_q) * kHq * c.dv;
  std::vector<double> ref_o(static_cast<size_t>(used_o)), lowp_o(static_cast<size_t>(used_o)),
      ref_lse(size_t(kHq) * used_q);
  ref::attention_varlen_fp64(pr, cu_q.data(), cu_k.data(), hq.data(), hk.data(), hv.data(), ref_o.data(),
                             ref_lse.data());
  ref::attention_varlen_lowp(pr, c.dt, cu_q.data(), cu_k.data(), hq.data(), hk.data(), hv.data(), lowp_o.data());

  // The rule, over all rows of all sequences (NaN counts as an infinite error); per-sequence
  // errors in the message.
  const double atol = check::default_atol(c.dt);
  double err = 0, lowp_err = 0, lse_err = 0;
  std::string per_seq;
  int64_t empty_bad = 0;
  for (int s = 0; s < b; ++s) {
    double seq_err = 0;
    for (int64_t row = cu_q[s]; row < cu_q[s + 1]; ++row) {
      for (int h = 0; h < kHq; ++h) {
        const int64_t base = (row * kHq + h) * c.dv;
        for (int e = 0; e < c.dv; ++e) {
          const double diff = std::fabs(ho[size_t(base + e)] - ref_o[size_t(base + e)]);
          seq_err = std::isnan(diff) ? INFINITY : std::max(seq_err, diff);
          if (std::isinf(seq_err)) break;
          lowp_err = std::max(lowp_err, std::fabs(lowp_o[size_t(base + e)] - ref_o[size_t(base + e)]));
        }
        const double r = ref_lse[size_t(h) * used_q + row];
        const double got = hlse[size_t(h) * total_q + row];
        if (std::isinf(r)) {  // sees no key: lse -inf and out 0, exactly
          bool ok = std::isinf(got) && got < 0;
          for (int e = 0; e < c.dv; ++e) ok = ok && ho[size_t(base + e)] == 0.0;
          empty_bad += !ok;
        } else {
          const double diff = std::fabs(got - r);
          lse_err = std::isnan(diff) ? INFINITY : std::max(lse_err, diff);
        }
      }
    }
    err = std::max(err, seq_err);
    per_seq += " seq" + std::to_string(s) + "(" + std::to_string(c.len_q[s]) + "x" + std::to_string(c.len_k[s]) +
               ")=" + std::to_string(seq_err);
  }
  const double bound = 2 * lowp_err + atol;
  EXPECT_LE(err, bound) << "out error " << err << " > bound " << bound << " (lowp " << lowp_err << ");" << per_seq;
  EXPECT_LE(lse_err, 1e-3) << "lse error";
  EXPECT_EQ(empty_bad, 0) << "rows without keys: not (out 0, lse -inf)";

  // Nothing written past cu_q[B]: out's extra rows and every head's extra lse entries keep the
  // poison (NaN).
  int64_t touched = 0;
  for (int64_t i = used_o; i < n_o; ++i) touched += !std::isnan(ho[size_t(i)]);
  for (int h = 0; h < kHq; ++h)
    for (int row = used_q; row < total_q; ++row) touched += !std::isnan(hlse[size_t(h) * total_q + row]);
  EXPECT_EQ(touched, 0) << "elements written past cu_q[B]";
}

INSTANTIATE_TEST_SUITE_P(Grid, Sm80Varlen, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

// The dispatch side, no GPU needed: every kernel head dim and dtype has a varlen kernel for both
// masks, sm80_supports accepts varlen calls, and a varlen call never takes a dense kernel.
TEST(Sm80VarlenDispatch, EveryHeadDimHasAVarlenKernel) {
  if (!detail::sm80_built()) GTEST_SKIP() << "sm80 family not built";
  static const int cu[2] = {0, 1};  // never dereferenced here
  for (auto [d, dv] : {std::pair{64, 64}, {8, 8}, {80, 80}, {128, 128}, {192, 128}, {256, 256}, {136, 64}})
    for (auto dt : {detail::ElemType::kFloat16, detail::ElemType::kBFloat16})
      for (bool causal : {false, true}) {
        detail::FwdParams p;
        p.d = d;
        p.d_v = dv;
        p.b = p.hq = p.hkv = p.sq = p.sk = 1;
        p.dtype = dt;
        p.causal = causal;
        p.cu_q = cu;
        p.cu_k = cu;
        p.total_q = p.total_k = 1;
        EXPECT_TRUE(detail::sm80_supports(p).ok()) << detail::sm80_supports(p).message();
        for (int sm : {80, 86, 90}) {
          const sm80::KernelEntry* e = detail::sm80_select(p, sm);
          ASSERT_NE(e, nullptr) << "d" << d << " d_v" << dv;
          EXPECT_TRUE(e->varlen);
          EXPECT_TRUE(e->padded);
          EXPECT_NE(e->launch_for(sm80::mask_kind(causal)), nullptr);
          p.cu_q = p.cu_k = nullptr;  // the same call dense: never a varlen kernel
          const sm80::KernelEntry* dense = detail::sm80_select(p, sm);
          ASSERT_NE(dense, nullptr);
          EXPECT_FALSE(dense->varlen);
          p.cu_q = p.cu_k = cu;
        }
      }
}

// Varlen calls with a window, softcap or ALiBi (no GPU needed): sm80_supports accepts them and
// they take the kernel head dim's varlen feature kernel (kLocal, padded), never the plain varlen
// or the dense feature one; the same call without cu_seqlens takes a dense feature kernel.
// (On a GPU, test_varlen.cpp's Sm80Features suite runs them against the reference.)
TEST(Sm80VarlenDispatch, FeatureCallsTakeTheVarlenFeatureKernel) {
  if (!detail::sm80_built()) GTEST_SKIP() << "sm80 family not built";
  static const int cu[2] = {0, 1};  // never dereferenced here
  static const float slopes[1] = {0.5f};
  struct Mods {
    int left, right;
    float softcap;
    bool alibi;
  };
  for (const Mods m : {Mods{0, 0, 0.f, false}, Mods{127, 0, 30.f, false}, Mods{-1, -1, 0.f, true},
                       Mods{1000, 3, 50.f, true}})
    for (auto [d, dv] : {std::pair{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}, {8, 8}})
      for (auto dt : {detail::ElemType::kFloat16, detail::ElemType::kBFloat16})
        for (bool causal : {false, true}) {
          detail::FwdParams p;
          p.d = d;
          p.d_v = dv;
          p.b = p.hq = p.hkv = p.sq = p.sk = 1;
          p.dtype = dt;
          p.causal = causal;
          p.window_left = m.left;
          p.window_right = m.right;
          p.softcap = m.softcap;
          p.alibi_slopes = m.alibi ? slopes : nullptr;
          p.cu_q = cu;
          p.cu_k = cu;
          p.total_q = p.total_k = 1;
          ASSERT_TRUE(p.has_features());
          EXPECT_TRUE(detail::sm80_supports(p).ok()) << detail::sm80_supports(p).message();
          for (int sm : {80, 86, 90}) {
            const sm80::KernelEntry* e = detail::sm80_select(p, sm);
            ASSERT_NE(e, nullptr) << "d" << d << " d_v" << dv;
            EXPECT_TRUE(e->varlen && e->feature && e->padded) << e->name();
            EXPECT_EQ(e->options.head_dim, sm80::kernel_head_dim(d, dv)) << e->name();
            EXPECT_NE(e->launch_for(MaskKind::kLocal), nullptr) << e->name();
            EXPECT_EQ(e->launch_for(MaskKind::kNone), nullptr) << e->name();
            p.cu_q = p.cu_k = nullptr;  // the same call dense: the dense feature kernel
            const sm80::KernelEntry* dense = detail::sm80_select(p, sm);
            ASSERT_NE(dense, nullptr);
            EXPECT_TRUE(dense->feature && !dense->varlen) << dense->name();
            p.cu_q = p.cu_k = cu;
          }
        }
}

// The clamp rule of a sequence's rows (sm80/varlen.h), no GPU needed: good offsets pass through;
// bad ones shorten or empty the sequence and never leave [0, total).
TEST(Sm80VarlenClamp, OffsetsNeverLeaveTheTensor) {
  struct Case {
    int lo, hi, total, max_len;
    int64_t start;
    int len;
  };
  const Case cases[] = {
      {0, 10, 100, 64, 0, 10},                   // plain
      {30, 30, 100, 64, 30, 0},                  // zero length
      {20, 90, 100, 64, 20, 64},                 // longer than max_seqlen
      {90, 200, 100, 64, 90, 10},                // past total
      {-7, 30, 100, 64, 0, 37},                  // negative start
      {30, 20, 100, 64, 30, 0},                  // decreasing
      {2000000000, INT_MIN, 100, 64, 100, 0},    // far past total, 64-bit difference
      {INT_MIN, INT_MAX, 100, 64, 0, 64},        // the widest difference
      {INT_MAX, INT_MIN, 100, 64, 100, 0},
      {0, 5, 0, 64, 0, 0},                       // empty tensor
      {5, 10, -3, 64, 0, 0},                     // negative total (never valid; still clamped)
  };
  for (const Case& c : cases) {
    const int cu[2] = {c.lo, c.hi};
    int64_t start = -1;
    const int len = sm80::varlen_rows(cu, 0, c.total, c.max_len, start);
    EXPECT_EQ(start, c.start) << c.lo << ".." << c.hi;
    EXPECT_EQ(len, c.len) << c.lo << ".." << c.hi;
    EXPECT_GE(start, 0);
    EXPECT_LE(start + len, std::max(c.total, 0));
  }
}

// Bad offsets on the GPU (no reference: clamped sequences may overlap): the call succeeds, every
// write stays inside o and lse (guard rows around both keep their bytes), rows some clamped
// sequence owns are finite (no read of the NaN guard rows around q, k and v), the others keep the
// poison.
TEST(Sm80VarlenBadOffsets, WritesStayInsideTheTensors) {
  FLASHATTN_REQUIRE_GPU();
  if (!detail::sm80_built()) GTEST_SKIP() << "sm80 family not built";
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "sm80 kernels need compute capability 8.0";
  constexpr int kD = 64, kH = 2, kHk = 1, kGuard = 16;
  const int total_q = 100, total_k = 80, max_q = 64, max_k = 70;
  // q rows: seq0 [0, 37), seq1 empty, seq2 [20, 84), seq3 [90, 100), seq4 empty.
  const std::vector<int32_t> cu_q{-7, 30, 20, 90, 2000000000, INT_MIN};
  // k rows: seq0 [0, 70), seq1 empty, seq2 [10, 80), seq3 empty (its rows: out 0, lse -inf).
  const std::vector<int32_t> cu_k{0, 75, 10, INT_MAX, -1, 80};
  const int b = 5;
  for (bool causal : {false, true}) {
    const int64_t q_row = int64_t(kH) * kD, k_row = int64_t(kHk) * kD;
    const int64_t q_alloc = (total_q + 2 * kGuard) * q_row, k_alloc = (total_k + 2 * kGuard) * k_row;
    const int64_t lse_alloc = int64_t(kH) * total_q + 2 * kGuard;
    DeviceBuffer q(size_t(q_alloc) * 2), k(size_t(k_alloc) * 2), v(size_t(k_alloc) * 2), o(size_t(q_alloc) * 2),
        lse(size_t(lse_alloc) * 4), dcu_q(size_t(b + 1) * 4), dcu_k(size_t(b + 1) * 4);
    check::fill_random(q.ptr, DType::kFloat16, q_alloc, 31, 0.3f, 1.f, nullptr);
    check::fill_random(k.ptr, DType::kFloat16, k_alloc, 32, 0.2f, 1.f, nullptr);
    check::fill_random(v.ptr, DType::kFloat16, k_alloc, 33, -0.4f, 1.f, nullptr);
    for (auto [buf, row, total] : {std::tuple{&q, q_row, total_q}, {&k, k_row, total_k}, {&v, k_row, total_k}}) {
      char* base = static_cast<char*>(buf->ptr);
      ASSERT_EQ(cudaMemset(base, 0xFF, size_t(kGuard * row) * 2), cudaSuccess);  // NaN guards
      ASSERT_EQ(cudaMemset(base + (kGuard + total) * row * 2, 0xFF, size_t(kGuard * row) * 2), cudaSuccess);
    }
    check::poison(o.ptr, DType::kFloat16, q_alloc, nullptr);
    check::poison(lse.ptr, DType::kFloat32, lse_alloc, nullptr);
    ASSERT_EQ(cudaMemcpy(dcu_q.ptr, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dcu_k.ptr, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);

    detail::FwdParams p;
    auto at = [](const DeviceBuffer& buf, int64_t elems) { return static_cast<char*>(buf.ptr) + elems * 2; };
    p.q = {at(q, kGuard * q_row), 0, q_row, kD};
    p.k = {at(k, kGuard * k_row), 0, k_row, kD};
    p.v = {at(v, kGuard * k_row), 0, k_row, kD};
    p.o = {at(o, kGuard * q_row), 0, q_row, kD};
    p.lse = static_cast<float*>(lse.ptr) + kGuard;
    p.b = b;
    p.sq = max_q;
    p.sk = max_k;
    p.hq = kH;
    p.hkv = kHk;
    p.h_ratio = kH / kHk;
    p.d = p.d_v = kD;
    p.scale = 0.125f;
    p.scale_log2 = static_cast<float>(0.125 * 1.4426950408889634);
    p.causal = causal;
    p.dtype = detail::ElemType::kFloat16;
    p.cu_q = static_cast<const int*>(dcu_q.ptr);
    p.cu_k = static_cast<const int*>(dcu_k.ptr);
    p.total_q = total_q;
    p.total_k = total_k;
    ASSERT_TRUE(detail::sm80_supports(p).ok());
    const Status st = detail::sm80_forward(p, nullptr);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    std::vector<uint16_t> ho(static_cast<size_t>(q_alloc));
    std::vector<float> hl(static_cast<size_t>(lse_alloc));
    ASSERT_EQ(cudaMemcpy(ho.data(), o.ptr, ho.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(hl.data(), lse.ptr, hl.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    auto owned = [](int row) { return row < 84 || row >= 90; };  // rows of some clamped sequence
    int64_t guard_touched = 0, owned_bad = 0, free_touched = 0;
    for (int64_t r = 0; r < total_q + 2 * kGuard; ++r) {
      const bool guard = r < kGuard || r >= kGuard + total_q;
      for (int64_t e = 0; e < q_row; ++e) {
        const uint16_t bits = ho[size_t(r * q_row + e)];
        if (guard) guard_touched += bits != 0xFFFF;
        else if (owned(int(r - kGuard))) owned_bad += std::isnan(half_bits_to_double(bits, DType::kFloat16));
        else free_touched += bits != 0xFFFF;
      }
    }
    for (int64_t i = 0; i < lse_alloc; ++i) {
      const bool guard = i < kGuard || i >= kGuard + int64_t(kH) * total_q;
      const int row = guard ? 0 : int((i - kGuard) % total_q);
      if (guard) guard_touched += !std::isnan(hl[size_t(i)]);
      else if (owned(row)) owned_bad += std::isnan(hl[size_t(i)]);
      else free_touched += !std::isnan(hl[size_t(i)]);
    }
    EXPECT_EQ(guard_touched, 0) << (causal ? "causal" : "full") << ": writes outside o / lse";
    EXPECT_EQ(owned_bad, 0) << (causal ? "causal" : "full") << ": NaN in rows a clamped sequence owns";
    EXPECT_EQ(free_touched, 0) << (causal ? "causal" : "full") << ": writes to rows no sequence owns";
    // Sequence 3's rows (no keys once clamped): out 0, lse -inf.
    for (int row = 90; row < 100; ++row)
      for (int h = 0; h < kH; ++h) {
        EXPECT_TRUE(std::isinf(hl[size_t(kGuard + h * total_q + row)]) && hl[size_t(kGuard + h * total_q + row)] < 0);
        EXPECT_EQ(ho[size_t((kGuard + row) * q_row + h * kD)], 0u);
      }
  }
}

}  // namespace
}  // namespace flashattn::testing
