// Every validation rule: a bad call returns a Status naming the argument and launches nothing
// (these run without a GPU, so any launch attempt would surface as a device error instead).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "api/validate.h"
#include "flashattn/flashattn.h"

using namespace flashattn;

namespace {

alignas(64) char g_buf[64];  // a valid, 16-byte aligned address; never dereferenced

// q, k: (.., d); v, out: (.., dv), dv < 0 meaning dv = d.
ForwardArgs good(int64_t b = 2, int64_t sq = 17, int64_t sk = 33, int64_t hq = 8, int64_t hkv = 2,
                 int64_t d = 128, int64_t dv = -1) {
  if (dv < 0) dv = d;
  ForwardArgs a;
  a.q = make_contiguous(g_buf, DType::kFloat16, b, sq, hq, d);
  a.k = make_contiguous(g_buf, DType::kFloat16, b, sk, hkv, d);
  a.v = make_contiguous(g_buf, DType::kFloat16, b, sk, hkv, dv);
  a.out = make_contiguous(g_buf, DType::kFloat16, b, sq, hq, dv);
  return a;
}

void expect_invalid(const ForwardArgs& a, const char* needle) {
  const Status s = validate(a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message();
  const Status f = forward(a);  // forward must reject the same way, before any device query
  EXPECT_EQ(f.code(), StatusCode::kInvalidArgument) << f.message();
}

}  // namespace

TEST(Validation, GoodArgumentsPass) { EXPECT_TRUE(validate(good()).ok()) << validate(good()).message(); }

TEST(Validation, NullPointers) {
  for (int which = 0; which < 4; ++which) {
    ForwardArgs a = good();
    TensorRef* t[] = {&a.q, &a.k, &a.v, &a.out};
    t[which]->data = nullptr;
    expect_invalid(a, (const char*[]){"q:", "k:", "v:", "out:"}[which]);
  }
}

TEST(Validation, DtypeMismatch) {
  ForwardArgs a = good();
  a.v.dtype = DType::kBFloat16;
  expect_invalid(a, "v: dtype");
  a = good();
  a.out.dtype = DType::kBFloat16;
  expect_invalid(a, "out: dtype");
}

TEST(Validation, UnsupportedDtype) {
  ForwardArgs a = good();
  a.q.dtype = a.k.dtype = a.v.dtype = a.out.dtype = DType::kFloat32;
  expect_invalid(a, "unsupported dtype float32");
  a = good();
  a.k.dtype = static_cast<DType>(42);
  expect_invalid(a, "k: unsupported dtype");
}

TEST(Validation, HeadDimsAreMultiplesOf8From8To256) {
  for (int64_t d = 8; d <= 256; d += 8) {
    const Status s = validate(good(1, 4, 4, 2, 2, d));
    EXPECT_TRUE(s.ok()) << d << ": " << s.message();
    // and as v's head dim under a q/k head dim of 64
    EXPECT_TRUE(validate(good(1, 4, 4, 2, 2, 64, d)).ok()) << "dv " << d;
  }
}

TEST(Validation, UnsupportedHeadDim) {
  for (int64_t d : {1, 4, 12, 100, 260, 264, 512}) {
    expect_invalid(good(1, 4, 4, 2, 2, d), "q: head dim");          // q/k's (and v's): q named
    expect_invalid(good(1, 4, 4, 2, 2, 64, d), "v: head dim");      // v's alone: v named
  }
  // A bad q/k head dim is reported even when v's is fine.
  expect_invalid(good(1, 4, 4, 2, 2, 12, 128), "q: head dim");
  ForwardArgs a = good(1, 4, 4, 2, 2, 264);
  const Status s = validate(a);
  EXPECT_EQ(s.message().rfind("q: head dim 264", 0), 0u) << s.message();
}

// Head dim 0 of q/k with a non-empty v/out: the call is "empty" by validation's rule (some size
// 0) and returns Ok without writing out, yet out = softmax(0) V (the mean of the visible value
// rows) has elements. It should be rejected ("q: head dim 0 not supported"); validate.cpp does
// not do so yet. Enable once it does.
// A zero head dim is refused, not taken as an empty call (out would be v's mean, lse log Sk).
TEST(Validation, HeadDimZeroIsRejected) {
  expect_invalid(good(1, 4, 4, 2, 2, 0, 64), "q: head dim 0");
  expect_invalid(good(1, 4, 4, 2, 2, 64, 0), "v: head dim 0");
  expect_invalid(good(0, 4, 4, 2, 2, 0, 0), "q: head dim 0");
}

TEST(Validation, HeadDimMismatch) {
  ForwardArgs a = good();
  a.k = make_contiguous(g_buf, DType::kFloat16, 2, 33, 2, 64);
  expect_invalid(a, "k: head dim");
}

TEST(Validation, ValueHeadDimMayDiffer) {
  // (D, Dv): q/k 192 with v 128 (MLA-style), v wider than q/k, small and odd pairs.
  for (auto [d, dv] : {std::pair<int64_t, int64_t>{192, 128}, {64, 128}, {40, 24}, {8, 256},
                       {256, 8}, {128, 64}}) {
    const ForwardArgs a = good(2, 17, 33, 8, 2, d, dv);
    detail::FwdParams p;
    bool empty = true;
    const Status s = detail::validate_and_convert(a, &p, &empty);
    ASSERT_TRUE(s.ok()) << d << "/" << dv << ": " << s.message();
    EXPECT_FALSE(empty);
    EXPECT_EQ(p.d, d);
    EXPECT_EQ(p.d_v, dv);
    // The default scale follows q.k's head dim, never v's.
    EXPECT_EQ(p.scale, 1.0f / std::sqrt(static_cast<float>(d))) << d << "/" << dv;
  }
  detail::FwdParams p;
  ASSERT_TRUE(detail::validate_and_convert(good(), &p, nullptr).ok());
  EXPECT_EQ(p.d_v, p.d);  // Dv == D: d_v is filled all the same
}

TEST(Validation, OutTakesValueHeadDim) {
  // v is 128 wide under q/k 192: out must be (B, Sq, Hq, 128), not q's shape.
  ForwardArgs a = good(2, 17, 33, 8, 2, 192, 128);
  a.out = make_contiguous(g_buf, DType::kFloat16, 2, 17, 8, 192);
  expect_invalid(a, "out: shape");
  const Status s = validate(a);
  EXPECT_EQ(s.message().rfind("out: shape (2, 17, 8, 192)", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("(2, 17, 8, 128)"), std::string::npos) << s.message();  // the expected
  // v narrower than q/k while out keeps q's head dim: the out check names it.
  a = good();
  a.v = make_contiguous(g_buf, DType::kFloat16, 2, 33, 2, 64);
  expect_invalid(a, "out: shape");
}

TEST(Validation, GqaRatio) {
  expect_invalid(good(2, 17, 33, 8, 3), "must divide");
  EXPECT_TRUE(validate(good(2, 17, 33, 8, 1)).ok());  // MQA
}

TEST(Validation, BatchMismatch) {
  ForwardArgs a = good();
  a.k = make_contiguous(g_buf, DType::kFloat16, 3, 33, 2, 128);
  expect_invalid(a, "batch");
}

TEST(Validation, KvSeqlenMismatch) {
  ForwardArgs a = good();
  a.v = make_contiguous(g_buf, DType::kFloat16, 2, 34, 2, 128);
  expect_invalid(a, "v: seqlen");
}

TEST(Validation, KvHeadsMismatch) {
  ForwardArgs a = good();
  a.v = make_contiguous(g_buf, DType::kFloat16, 2, 33, 4, 128);
  expect_invalid(a, "v: heads");
}

TEST(Validation, OutShape) {
  ForwardArgs a = good();
  a.out = make_contiguous(g_buf, DType::kFloat16, 2, 16, 8, 128);
  expect_invalid(a, "out: shape");
  for (int i = 0; i < 3; ++i) {  // B, Sq, Hq are q's, also when Dv != D
    a = good(2, 17, 33, 8, 2, 64, 128);
    a.out.shape[i] += 1;
    expect_invalid(a, "out: shape");
  }
}

TEST(Validation, NonUnitHeadDimStride) {
  ForwardArgs a = good();
  a.k.stride[3] = 2;
  expect_invalid(a, "k: headdim stride");
}

TEST(Validation, Alignment) {
  ForwardArgs a = good();
  a.q.data = g_buf + 8;
  expect_invalid(a, "q: base pointer is not 16-byte aligned");
  a = good();
  a.v.stride[1] += 4;  // 4 elements = 8 bytes
  expect_invalid(a, "v: stride");
}

TEST(Validation, NegativeSizesAndStrides) {
  ForwardArgs a = good();
  a.q.shape[1] = -1;
  expect_invalid(a, "q: negative size");
  a = good();
  a.k.stride[0] = -8;
  expect_invalid(a, "k: negative stride");
}

TEST(Validation, SoftmaxScale) {
  for (float s : {std::nanf(""), std::numeric_limits<float>::infinity(), -0.5f}) {
    ForwardArgs a = good();
    a.softmax_scale = s;
    expect_invalid(a, "softmax_scale");
  }
  ForwardArgs a = good();
  a.softmax_scale = 0.3f;
  EXPECT_TRUE(validate(a).ok());
}

TEST(Validation, ResolvedScaleIsPositive) {
  // The one scale check: the families' supports() rely on p.scale > 0 (src/api/backends.h).
  for (int64_t d : {8, 24, 40, 64, 96, 128, 192, 200, 256}) {
    for (float s : {0.f, 0.3f, std::numeric_limits<float>::denorm_min()}) {
      ForwardArgs a = good(2, 17, 33, 8, 2, d);
      a.softmax_scale = s;
      detail::FwdParams p;
      bool empty = true;
      ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
      EXPECT_GT(p.scale, 0.f);
      EXPECT_TRUE(std::isfinite(p.scale));
      EXPECT_EQ(p.scale, s > 0.f ? s : 1.0f / std::sqrt(static_cast<float>(d)));
    }
  }
}

TEST(Validation, OffsetOverflow) {
  ForwardArgs a = good();
  a.k.stride[0] = int64_t(1) << 62;
  expect_invalid(a, "k: element offsets overflow int64");
}

TEST(Validation, SizeAboveInt32) {
  ForwardArgs a = good();
  a.q.shape[1] = a.out.shape[1] = int64_t(1) << 31;
  expect_invalid(a, "exceeds 2^31-1");
}

TEST(Validation, UnknownBackend) {
  ForwardArgs a = good();
  a.backend = static_cast<Backend>(9);
  expect_invalid(a, "backend");
}

TEST(Validation, ZeroSizedCallSucceedsAndLaunchesNothing) {
  // Null pointers are fine when there is nothing to read or write; no device is needed.
  for (int dim = 0; dim < 3; ++dim) {
    ForwardArgs a = good();
    TensorRef* ts[] = {&a.q, &a.k, &a.v, &a.out};
    for (TensorRef* t : ts) t->data = nullptr;
    if (dim == 0) { a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.out.shape[0] = 0; }
    if (dim == 1) { a.q.shape[1] = a.out.shape[1] = 0; }
    if (dim == 2) { a.k.shape[1] = a.v.shape[1] = 0; }
    EXPECT_TRUE(forward(a).ok()) << forward(a).message();
  }
}

// ---- Varlen (packed) calls: cu_seqlens set ----
namespace {
alignas(64) int32_t g_cu[8];  // stands in for device offsets; never dereferenced here

ForwardArgs good_varlen(int64_t total_q = 40, int64_t total_k = 50) {
  ForwardArgs a = good(1, total_q, total_k);
  a.cu_seqlens_q = g_cu;
  a.cu_seqlens_k = g_cu;
  a.num_seqs = 3;
  a.max_seqlen_q = 20;
  a.max_seqlen_k = 30;
  return a;
}
}  // namespace

TEST(ValidationVarlen, GoodArgumentsPassAndConvert) {
  const ForwardArgs a = good_varlen();
  detail::FwdParams p;
  bool empty = true;
  const Status s = detail::validate_and_convert(a, &p, &empty);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(empty);
  EXPECT_TRUE(p.varlen());
  EXPECT_EQ(p.b, 3);
  EXPECT_EQ(p.sq, 20);
  EXPECT_EQ(p.sk, 30);
  EXPECT_EQ(p.total_q, 40);
  EXPECT_EQ(p.total_k, 50);
  EXPECT_EQ(p.cu_q, g_cu);
}

TEST(ValidationVarlen, MaxLengthsAreCappedByThePackedRows) {
  ForwardArgs a = good_varlen();
  a.max_seqlen_q = 1000;
  a.max_seqlen_k = 1000;
  detail::FwdParams p;
  bool empty = true;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_EQ(p.sq, 40);
  EXPECT_EQ(p.sk, 50);
}

TEST(ValidationVarlen, BadArgumentsAreNamed) {
  ForwardArgs a = good_varlen();
  a.cu_seqlens_k = nullptr;
  expect_invalid(a, "cu_seqlens_k");
  a = good_varlen();
  a.cu_seqlens_q = nullptr;
  expect_invalid(a, "cu_seqlens_q");
  a = good_varlen();
  a.cu_seqlens_q = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(g_cu) + 2);
  expect_invalid(a, "cu_seqlens_q: pointer is not 4-byte aligned");
  a = good_varlen();
  a.num_seqs = -1;
  expect_invalid(a, "num_seqs");
  a = good_varlen();
  a.max_seqlen_q = -3;
  expect_invalid(a, "max_seqlen_q");
  a = good_varlen();
  a.max_seqlen_k = -3;
  expect_invalid(a, "max_seqlen_k");
  for (int t = 0; t < 4; ++t) {
    a = good_varlen();
    TensorRef* refs[] = {&a.q, &a.k, &a.v, &a.out};
    const char* names[] = {"q: a varlen call", "k: a varlen call", "v: a varlen call", "out: a varlen call"};
    refs[t]->shape[0] = 2;
    expect_invalid(a, names[t]);
  }
  // The dense rules still apply to the packed tensors.
  a = good_varlen();
  a.k.shape[3] = 64;
  a.k.stride[2] = 64;
  expect_invalid(a, "k: head dim");
  // No key rows at all (sequences of length 0 are fine, an empty k is not).
  a = good_varlen(40, 0);
  expect_invalid(a, "k: no rows");
}

TEST(ValidationVarlen, CallsWithoutQueryRowsAreEmpty) {
  for (int which = 0; which < 3; ++which) {
    ForwardArgs a = good_varlen();
    if (which == 0) a.num_seqs = 0;
    if (which == 1) a.max_seqlen_q = 0;
    if (which == 2) a = good_varlen(0, 50);
    bool empty = false;
    detail::FwdParams p;
    const Status s = detail::validate_and_convert(a, &p, &empty);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(empty) << which;
    EXPECT_TRUE(forward(a).ok()) << which;  // nothing launched: fine without a GPU
  }
}

// ---- Sliding window, softcap, ALiBi ----
TEST(ValidationFeatures, ValuesAreCheckedAndConverted) {
  ForwardArgs a = good();
  a.window_left = -2;
  expect_invalid(a, "window_left: -2");
  a = good();
  a.window_right = -5;
  expect_invalid(a, "window_right: -5");
  a = good();
  a.softcap = -1.f;
  expect_invalid(a, "softcap");
  a = good();
  a.softcap = std::numeric_limits<float>::infinity();
  expect_invalid(a, "softcap");
  a = good();
  a.softcap = std::nanf("");
  expect_invalid(a, "softcap");
  a = good();
  alignas(16) static float slopes[16] = {};
  a.alibi_slopes = reinterpret_cast<const float*>(reinterpret_cast<const char*>(slopes) + 2);
  expect_invalid(a, "alibi_slopes: pointer");
  a = good();
  a.alibi_slopes = slopes;
  a.alibi_batch_stride = 3;  // below Hq = 8
  expect_invalid(a, "alibi_batch_stride");
  a.alibi_batch_stride = 8;
  EXPECT_TRUE(validate(a).ok());
  // A causal call with a window keeps right = 0 (the intersection).
  a = good();
  a.causal = true;
  a.window_left = 100;
  a.window_right = 7;
  detail::FwdParams p;
  bool empty = true;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_EQ(p.window_left, 100);
  EXPECT_EQ(p.window_right, 0);
  EXPECT_TRUE(p.has_window());
  EXPECT_TRUE(p.causal);
}
