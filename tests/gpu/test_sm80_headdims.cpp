// sm80 family (Backend::kSm80 forced) at head dims that are not an instantiated kernel's, and
// with v's head dim d_v != d: each call runs on the smallest kernel head dim covering max(d, d_v),
// padded (sm80/fwd/config.h, Sm80FwdPadded). Checked against the GPU references under the
// correctness rule, lse included, with every buffer wider than the call's view:
//  - q, k and v are views inside (.., D + 8) allocations whose 8 extra columns per head hold NaN,
//    so a kernel that takes a q/k column at or past d into Q K^T (rather than zeros), or lets a
//    v column at or past d_v reach a stored output column, fails;
//  - out is a view inside a (.., d_v + 8) allocation poisoned with NaN, so an unwritten column
//    fails the rule and a written column at or past d_v fails the gap check.
// (Reads past a row's end are compute-sanitizer's to find: run this suite under memcheck.)
// The dispatch rule itself (which kernel serves which (d, d_v)) is checked without a GPU.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/backends.h"
#include "common/params.h"
#include "gpu_util.h"
#include "sm80/tuned_select.h"
#include "sm80/tuned_table.h"

namespace flashattn::testing {
namespace {

constexpr int kGap = 8;  // extra columns per head of every buffer (16 B: strides stay valid)

struct HeadDimCase {
  int d, dv;
  bool causal;
  DType dt;
  int b, sq, sk, hq, hkv;
};

std::string name(const HeadDimCase& c) {
  return "d" + std::to_string(c.d) + "v" + std::to_string(c.dv) + (c.causal ? "_causal" : "_full") +
         (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") + "_b" + std::to_string(c.b) + "_sq" + std::to_string(c.sq) +
         "_sk" + std::to_string(c.sk) + "_h" + std::to_string(c.hq) + "x" + std::to_string(c.hkv);
}

void PrintTo(const HeadDimCase& c, std::ostream* os) { *os << name(c); }

std::vector<HeadDimCase> cases() {
  std::vector<std::pair<int, int>> dims;
  for (int d : {8, 24, 40, 72, 80, 96, 112, 136, 160, 192, 200, 256}) dims.push_back({d, d});
  for (auto p : {std::pair{192, 128}, {64, 128}, {128, 64}, {40, 24}}) dims.push_back(p);
  std::vector<HeadDimCase> cs;
  for (auto [d, dv] : dims) {
    for (bool causal : {false, true}) {
      // Sq < Sk (several key blocks, a partial last one) and Sq > Sk (causal: rows and whole
      // query blocks without keys); GQA in both; the dtype alternates so both are covered.
      cs.push_back({d, dv, causal, causal ? DType::kFloat16 : DType::kBFloat16, 2, 113, 300, 4, 2});
      cs.push_back({d, dv, causal, causal ? DType::kBFloat16 : DType::kFloat16, 1, 300, 77, 2, 1});
    }
  }
  return cs;
}

// A (b, s, h, dim) view inside a (b, s, h, dim + kGap) allocation.
TensorRef gapped_view(void* ptr, DType dt, int b, int s, int h, int dim) {
  TensorRef t = make_contiguous(ptr, dt, b, s, h, dim);
  t.stride[2] = dim + kGap;
  t.stride[1] = int64_t(h) * (dim + kGap);
  t.stride[0] = t.stride[1] * s;
  return t;
}

// Random values in the view's columns, NaN (0xFFFF in both 16-bit types) in the kGap columns.
void fill_gapped(void* ptr, DType dt, int64_t rows, int dim, uint64_t seed, float mean) {
  check::fill_random(ptr, dt, rows * (dim + kGap), seed, mean, 1.f, nullptr);
  const size_t pitch = size_t(dim + kGap) * 2;
  EXPECT_EQ(cudaMemset2D(static_cast<char*>(ptr) + size_t(dim) * 2, pitch, 0xFF, kGap * 2, size_t(rows)),
            cudaSuccess);
}

class Sm80HeadDims : public ::testing::TestWithParam<HeadDimCase> {};

TEST_P(Sm80HeadDims, MatchesReferenceAndWritesOnlyItsColumns) {
  FLASHATTN_REQUIRE_GPU();
  const HeadDimCase c = GetParam();
  const int64_t rows_q = int64_t(c.b) * c.sq * c.hq, rows_kv = int64_t(c.b) * c.sk * c.hkv;
  DeviceBuffer q(size_t(rows_q) * (c.d + kGap) * 2), k(size_t(rows_kv) * (c.d + kGap) * 2),
      v(size_t(rows_kv) * (c.dv + kGap) * 2), o(size_t(rows_q) * (c.dv + kGap) * 2),
      lse(size_t(c.b) * c.hq * c.sq * 4);
  fill_gapped(q.ptr, c.dt, rows_q, c.d, 11 + c.d, 0.3f);
  fill_gapped(k.ptr, c.dt, rows_kv, c.d, 12 + c.sk, 0.2f);
  fill_gapped(v.ptr, c.dt, rows_kv, c.dv, 13 + c.dv, -0.4f);
  check::poison(o.ptr, c.dt, rows_q * (c.dv + kGap), nullptr);
  check::poison(lse.ptr, DType::kFloat32, int64_t(c.b) * c.hq * c.sq, nullptr);

  ForwardArgs a;
  a.q = gapped_view(q.ptr, c.dt, c.b, c.sq, c.hq, c.d);
  a.k = gapped_view(k.ptr, c.dt, c.b, c.sk, c.hkv, c.d);
  a.v = gapped_view(v.ptr, c.dt, c.b, c.sk, c.hkv, c.dv);
  a.out = gapped_view(o.ptr, c.dt, c.b, c.sq, c.hq, c.dv);
  a.lse = static_cast<float*>(lse.ptr);
  a.causal = c.causal;
  a.backend = Backend::kSm80;
  const Status st = forward(a, nullptr);
  if (st.code() == StatusCode::kNotSupported && st.message().find("not built") != std::string::npos) {
    GTEST_SKIP() << st.message();
  }
  // Every valid (d, d_v) must run on sm80: no other refusal is acceptable.
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const check::Report r = check::check_against_reference(a, nullptr);
  EXPECT_TRUE(r.pass) << r.message;
  EXPECT_TRUE(r.lse_checked);

  // out's kGap columns per head still hold the poison.
  std::vector<uint16_t> host(size_t(rows_q) * (c.dv + kGap));
  ASSERT_EQ(cudaMemcpy(host.data(), o.ptr, host.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t touched = 0;
  for (int64_t row = 0; row < rows_q; ++row)
    for (int e = c.dv; e < c.dv + kGap; ++e) touched += host[size_t(row) * (c.dv + kGap) + e] != 0xFFFF;
  EXPECT_EQ(touched, 0) << "elements written at or past d_v = " << c.dv;
}

INSTANTIATE_TEST_SUITE_P(Grid, Sm80HeadDims, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

// The library lists kernel (o, dt, padded) for the mask of `causal` (sm80/tuned_table.h: what
// fwd/instantiations/fwd_d*.cu instantiate).
template <int D>
bool listed_for(const sm80::Sm80FwdOptions& o, detail::ElemType dt, bool causal, bool padded) {
  auto find = [&](const auto& keys) {
    for (const sm80::KernelKey& k : keys) {
      if (k.options == o && k.dtype == dt && k.padded == padded) return causal ? k.mask_causal : k.mask_none;
    }
    return false;
  };
  return padded ? find(sm80::dispatchable_kernels<D, true>()) : find(sm80::dispatchable_kernels<D>());
}
bool listed(int hd, const sm80::Sm80FwdOptions& o, detail::ElemType dt, bool causal, bool padded) {
  switch (hd) {
    case 64: return listed_for<64>(o, dt, causal, padded);
    case 128: return listed_for<128>(o, dt, causal, padded);
    case 192: return listed_for<192>(o, dt, causal, padded);
    case 256: return listed_for<256>(o, dt, causal, padded);
    default: return false;
  }
}

// The dispatch rule, no GPU needed: every (d, d_v) validation admits is served, by the smallest
// instantiated head dim covering both, padded exactly when one differs from it, through the
// tuned row of that head dim (an sm the table names) or its default (one it does not), whose
// kernel, padded or not, the library instantiates. (sm80_select itself runs in the GPU cases
// above: launch_entry refuses a kernel that does not serve the call's head dims.)
TEST(Sm80HeadDimsDispatch, EveryPairHasItsKernel) {
  if (!detail::sm80_built()) GTEST_SKIP() << "sm80 family not built";
  using detail::ElemType;
  for (int d = 8; d <= 256; d += 8) {
    for (int dv = 8; dv <= 256; dv += 8) {
      const int want = d > dv ? d : dv;
      int hd = 0;
      for (int k : sm80::kHeadDims) {
        if (k >= want) {
          hd = k;
          break;
        }
      }
      ASSERT_NE(hd, 0);
      ASSERT_EQ(sm80::kernel_head_dim(d, dv), hd);
      const bool padded = d != hd || dv != hd;
      ASSERT_EQ(sm80::needs_padding(d, dv), padded);
      detail::FwdParams p;
      p.d = d;
      p.d_v = dv;
      p.b = p.hq = p.hkv = p.sq = p.sk = 1;
      EXPECT_TRUE(detail::sm80_supports(p).ok()) << detail::sm80_supports(p).message();
      for (ElemType dt : {ElemType::kFloat16, ElemType::kBFloat16})
        for (bool causal : {false, true})
          for (int sm : {80, 86, 90})
            for (int s : {1, 600, 3000, 20000}) {
              const sm80::TunedRow* r = sm80::select_tuned_row(sm80::kTunedRows, sm, dt, hd, causal, s, s,
                                                               [](const sm80::TunedRow&) { return true; });
              const sm80::Sm80FwdOptions o = r != nullptr ? r->options() : sm80::default_options(hd);
              EXPECT_EQ(o.head_dim, hd);
              EXPECT_TRUE(listed(hd, o, dt, causal, padded))
                  << "d" << d << " d_v" << dv << " sm" << sm << " s" << s << (causal ? " causal" : " full");
            }
    }
  }
}

}  // namespace
}  // namespace flashattn::testing
