// Every validation rule: a bad call returns a Status naming the argument and launches nothing
// (these run without a GPU, so any launch attempt would surface as a device error instead).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "api/validate.h"
#include "flashattn/flashattn.h"

using namespace flashattn;

namespace {

alignas(64) char g_buf[64];  // a valid, 16-byte aligned address; never dereferenced

ForwardArgs good(int64_t b = 2, int64_t sq = 17, int64_t sk = 33, int64_t hq = 8, int64_t hkv = 2,
                 int64_t d = 128) {
  ForwardArgs a;
  a.q = make_contiguous(g_buf, DType::kFloat16, b, sq, hq, d);
  a.k = make_contiguous(g_buf, DType::kFloat16, b, sk, hkv, d);
  a.v = make_contiguous(g_buf, DType::kFloat16, b, sk, hkv, d);
  a.out = make_contiguous(g_buf, DType::kFloat16, b, sq, hq, d);
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

TEST(Validation, UnsupportedHeadDim) {
  for (int64_t d : {32, 80, 100, 512}) {
    ForwardArgs a = good(1, 4, 4, 2, 2, d);
    expect_invalid(a, "head dim");
  }
  for (int64_t d : {64, 96, 128, 192, 256}) EXPECT_TRUE(validate(good(1, 4, 4, 2, 2, d)).ok()) << d;
}

TEST(Validation, HeadDimMismatch) {
  ForwardArgs a = good();
  a.k = make_contiguous(g_buf, DType::kFloat16, 2, 33, 2, 64);
  expect_invalid(a, "k: head dim");
  a = good();
  a.v = make_contiguous(g_buf, DType::kFloat16, 2, 33, 2, 64);
  expect_invalid(a, "v: head dim");
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
  for (int64_t d : {64, 96, 128, 192, 256}) {
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
