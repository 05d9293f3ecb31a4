// The backward's argument rules: each bad call returns kInvalidArgument naming the argument,
// before any device query (these run without a GPU). The views point at made-up addresses in
// separate ranges: validation reads no tensor memory, and overlap is judged on addresses.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "api/validate.h"
#include "flashattn/flashattn.h"

using namespace flashattn;
using detail::ByteSet;
using detail::Overlap;

namespace {

// Address range i (1 TiB apart, 16-byte aligned), never dereferenced.
char* region(int i) { return reinterpret_cast<char*>((uintptr_t{1} << 44) + (uintptr_t{1} << 40) * i); }

bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

// q, k, dq, dk: (.., d); v, out, dout, dv: (.., dv), dv < 0 meaning dv = d.
BackwardArgs good(int64_t b = 2, int64_t sq = 17, int64_t sk = 33, int64_t hq = 8, int64_t hkv = 2,
                  int64_t d = 128, DType t = DType::kFloat16, int64_t dv = -1) {
  if (dv < 0) dv = d;
  BackwardArgs a;
  a.dout = make_contiguous(region(0), t, b, sq, hq, dv);
  a.q = make_contiguous(region(1), t, b, sq, hq, d);
  a.k = make_contiguous(region(2), t, b, sk, hkv, d);
  a.v = make_contiguous(region(3), t, b, sk, hkv, dv);
  a.out = make_contiguous(region(4), t, b, sq, hq, dv);
  a.lse = reinterpret_cast<const float*>(region(5));
  a.dq = make_contiguous(region(6), t, b, sq, hq, d);
  a.dk = make_contiguous(region(7), t, b, sk, hkv, d);
  a.dv = make_contiguous(region(8), t, b, sk, hkv, dv);
  return a;
}

// (D, Dv) pairs with Dv != D: MLA-style 192/128, v wider than q/k, small and odd dims.
constexpr std::pair<int64_t, int64_t> kDvPairs[] = {{192, 128}, {64, 128}, {40, 24}, {8, 256}};

void expect_invalid(const BackwardArgs& a, const std::string& prefix, const char* detail = "") {
  const Status s = validate(a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << "expected '" << prefix << "...', got: " << s.message();
  EXPECT_NE(s.message().find(detail), std::string::npos) << "message: " << s.message();
  const Status f = backward(a);  // rejected the same way, before any device query or launch
  EXPECT_EQ(f.code(), StatusCode::kInvalidArgument) << f.message();
  EXPECT_EQ(f.message(), s.message());
}

TensorRef* grad(BackwardArgs& a, int i) { return (TensorRef*[]){&a.dq, &a.dk, &a.dv}[i]; }
const char* kGradNames[] = {"dq", "dk", "dv"};

}  // namespace

TEST(BwdValidation, GoodArgumentsPass) {
  EXPECT_TRUE(validate(good()).ok()) << validate(good()).message();
  for (int64_t d = 8; d <= 256; d += 8) {
    const Status s = validate(good(1, 4, 4, 2, 2, d, DType::kBFloat16));
    EXPECT_TRUE(s.ok()) << d << ": " << s.message();
  }
  for (auto [d, dv] : kDvPairs) {
    const Status s = validate(good(2, 17, 33, 8, 2, d, DType::kFloat16, dv));
    EXPECT_TRUE(s.ok()) << d << "/" << dv << ": " << s.message();
  }
  EXPECT_TRUE(validate(good(2, 17, 33, 8, 1)).ok());  // MQA
}

TEST(BwdValidation, ConvertFillsParams) {
  BackwardArgs a = good();
  a.causal = true;
  a.deterministic = true;
  a.dq.stride[1] = 8 * 128 + 64;  // padded rows: the strides travel, not recomputed
  a.dq.stride[0] = 17 * a.dq.stride[1];
  detail::BwdParams p;
  bool empty = true;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_FALSE(empty);
  EXPECT_EQ(p.b, 2); EXPECT_EQ(p.sq, 17); EXPECT_EQ(p.sk, 33);
  EXPECT_EQ(p.hq, 8); EXPECT_EQ(p.hkv, 2); EXPECT_EQ(p.d, 128); EXPECT_EQ(p.h_ratio, 4);
  EXPECT_EQ(p.d_v, 128);
  EXPECT_FLOAT_EQ(p.scale, 1.0f / std::sqrt(128.0f));
  EXPECT_FLOAT_EQ(p.scale_log2, p.scale * 1.4426950408889634f);
  EXPECT_TRUE(p.causal);
  EXPECT_TRUE(p.deterministic);
  EXPECT_EQ(p.dtype, detail::ElemType::kFloat16);
  EXPECT_EQ(p.dout.ptr, a.dout.data); EXPECT_EQ(p.q.ptr, a.q.data);
  EXPECT_EQ(p.k.ptr, a.k.data);       EXPECT_EQ(p.v.ptr, a.v.data);
  EXPECT_EQ(p.o.ptr, a.out.data);     EXPECT_EQ(p.lse, a.lse);
  EXPECT_EQ(p.dq.ptr, a.dq.data);     EXPECT_EQ(p.dk.ptr, a.dk.data); EXPECT_EQ(p.dv.ptr, a.dv.data);
  EXPECT_EQ(p.dq.ss, 8 * 128 + 64);
  EXPECT_EQ(p.dq.sb, a.dq.stride[0]);
  EXPECT_EQ(p.dk.sh, 128);
  a.softmax_scale = 0.25f;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_EQ(p.scale, 0.25f);
}

TEST(BwdValidation, ConvertFillsValueHeadDim) {
  // q/k 192 with v 128: d_v is v's, the default scale is q.k's, and the Dv-wide views (dout,
  // out, dv) keep their own strides.
  const BackwardArgs a = good(2, 17, 33, 8, 2, 192, DType::kBFloat16, 128);
  detail::BwdParams p;
  bool empty = true;
  const Status s = detail::validate_and_convert(a, &p, &empty);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(empty);
  EXPECT_EQ(p.d, 192);
  EXPECT_EQ(p.d_v, 128);
  EXPECT_FLOAT_EQ(p.scale, 1.0f / std::sqrt(192.0f));
  EXPECT_EQ(p.q.sh, 192);  EXPECT_EQ(p.dq.sh, 192); EXPECT_EQ(p.dk.sh, 192);
  EXPECT_EQ(p.v.sh, 128);  EXPECT_EQ(p.o.sh, 128);  EXPECT_EQ(p.dout.sh, 128);
  EXPECT_EQ(p.dv.sh, 128); EXPECT_EQ(p.dv.ss, 2 * 128);
}

TEST(BwdValidation, ForwardRulesOnQKVOut) {
  for (int64_t d : {4, 12, 100, 264}) {
    expect_invalid(good(1, 4, 4, 2, 2, d), "q: head dim");
    expect_invalid(good(1, 4, 4, 2, 2, 64, DType::kFloat16, d), "v: head dim");
  }
  // out takes v's head dim: q's shape is wrong when Dv != D.
  BackwardArgs a = good(2, 17, 33, 8, 2, 192, DType::kFloat16, 128);
  a.out = make_contiguous(region(4), DType::kFloat16, 2, 17, 8, 192);
  expect_invalid(a, "out: shape");
  expect_invalid(good(2, 17, 33, 8, 3), "k: heads", "must divide");
  a = good();
  a.k.dtype = DType::kBFloat16;
  expect_invalid(a, "k: dtype");
  a = good();
  a.v = make_contiguous(region(3), DType::kFloat16, 2, 34, 2, 128);
  expect_invalid(a, "v: seqlen");
  a = good();
  a.out = make_contiguous(region(4), DType::kFloat16, 2, 16, 8, 128);
  expect_invalid(a, "out: shape");
  a = good();
  a.q.data = region(1) + 8;
  expect_invalid(a, "q: base pointer is not 16-byte aligned");
  a = good();
  a.out.stride[2] = 4;
  expect_invalid(a, "out: stride");
  a = good();
  a.softmax_scale = -1.f;
  expect_invalid(a, "softmax_scale");
  a = good();
  a.backend = static_cast<Backend>(7);
  expect_invalid(a, "backend");
}

TEST(BwdValidation, DoutLikeOut) {
  BackwardArgs a = good();
  a.dout.dtype = DType::kFloat32;
  expect_invalid(a, "dout: unsupported dtype float32");
  a = good();
  a.dout.dtype = DType::kBFloat16;
  expect_invalid(a, "dout: dtype bfloat16 differs from out's float16");
  a = good();
  a.dout = make_contiguous(region(0), DType::kFloat16, 2, 17, 8, 64);
  expect_invalid(a, "dout: shape", "differs from out's");
  // Dv != D: dout is out-shaped (v's head dim); q's shape is refused, naming out.
  for (auto [d, dv] : kDvPairs) {
    a = good(2, 17, 33, 8, 2, d, DType::kFloat16, dv);
    EXPECT_TRUE(validate(a).ok()) << validate(a).message();
    a.dout = make_contiguous(region(0), DType::kFloat16, 2, 17, 8, d);
    expect_invalid(a, "dout: shape (2, 17, 8, " + std::to_string(d) + ")",
                   ("differs from out's (2, 17, 8, " + std::to_string(dv) + ")").c_str());
  }
  a = good();
  a.dout.data = nullptr;
  expect_invalid(a, "dout: null data pointer");
  a = good();
  a.dout.stride[3] = 2;
  expect_invalid(a, "dout: headdim stride");
  a = good();
  a.dout.data = region(0) + 2;
  expect_invalid(a, "dout: base pointer");
  a = good();
  a.dout.stride[0] = -8;
  expect_invalid(a, "dout: negative stride");
}

TEST(BwdValidation, GradientsLikeTheirInputs) {
  const char* refs[] = {"q's", "k's", "v's"};
  for (int g = 0; g < 3; ++g) {
    const std::string name = kGradNames[g];
    BackwardArgs a = good();
    grad(a, g)->dtype = DType::kBFloat16;
    expect_invalid(a, name + ": dtype bfloat16 differs from " + refs[g]);
    a = good();
    grad(a, g)->dtype = DType::kFloat32;
    expect_invalid(a, name + ": unsupported dtype");
    a = good();
    grad(a, g)->shape[1] += 1;
    expect_invalid(a, name + ": shape", refs[g]);
    a = good();
    grad(a, g)->shape[2] = 4;
    expect_invalid(a, name + ": shape");
    a = good();
    grad(a, g)->data = nullptr;
    expect_invalid(a, name + ": null data pointer");
    a = good();
    grad(a, g)->data = static_cast<char*>(grad(a, g)->data) + 4;
    expect_invalid(a, name + ": base pointer is not 16-byte aligned");
    a = good();
    grad(a, g)->stride[1] += 4;
    expect_invalid(a, name + ": stride");
    a = good();
    grad(a, g)->stride[3] = 0;
    expect_invalid(a, name + ": headdim stride");
    a = good();
    grad(a, g)->stride[0] = int64_t{1} << 62;
    expect_invalid(a, name + ": element offsets overflow");
  }
}

TEST(BwdValidation, GradientsTakeTheirInputsHeadDimWhenDvDiffers) {
  // dq, dk are (.., D) like q, k; dv is (.., Dv) like v. Each shaped with the other head dim
  // is refused, naming the input it must match.
  for (auto [d, dv] : kDvPairs) {
    BackwardArgs a = good(2, 17, 33, 8, 2, d, DType::kFloat16, dv);
    a.dv = make_contiguous(region(8), DType::kFloat16, 2, 33, 2, d);
    expect_invalid(a, "dv: shape", "differs from v's");
    a = good(2, 17, 33, 8, 2, d, DType::kFloat16, dv);
    a.dk = make_contiguous(region(7), DType::kFloat16, 2, 33, 2, dv);
    expect_invalid(a, "dk: shape", "differs from k's");
    a = good(2, 17, 33, 8, 2, d, DType::kFloat16, dv);
    a.dq = make_contiguous(region(6), DType::kFloat16, 2, 17, 8, dv);
    expect_invalid(a, "dq: shape", "differs from q's");
  }
}

TEST(BwdValidation, Lse) {
  BackwardArgs a = good();
  a.lse = nullptr;
  expect_invalid(a, "lse: null pointer");
  a = good();
  a.lse = reinterpret_cast<const float*>(region(5) + 2);
  expect_invalid(a, "lse: pointer is not 4-byte aligned");
  a = good();
  a.lse = reinterpret_cast<const float*>(region(5) + 4);  // 4-byte alignment is enough
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
}

TEST(BwdValidation, GradientOverInputIsRejected) {
  BackwardArgs a = good();
  a.dk = a.v;  // aliasing
  expect_invalid(a, "dk: overlaps v");
  a = good();
  a.dq.data = static_cast<char*>(a.out.data) + 16 * 8 * 128 * 2;  // starts inside out
  expect_invalid(a, "dq: overlaps out");
  a = good();
  a.dq.data = static_cast<char*>(a.out.data) - 2 * 17 * 8 * 128 * 2 + 16;  // its last 16 bytes
  expect_invalid(a, "dq: overlaps out");
  a = good();
  a.dv.data = static_cast<char*>(a.dout.data) + 2 * 17 * 8 * 128 * 2 - 2 * 33 * 2 * 128 * 2 + 16;
  expect_invalid(a, "dv: overlaps dout");
  a = good();
  a.dk.data = static_cast<char*>(a.q.data) + 128;
  expect_invalid(a, "dk: overlaps q");
  a = good();
  // lse spans B * Hq * Sq floats: its last float is the first 4 bytes of dq's last 16.
  a.lse = reinterpret_cast<const float*>(static_cast<char*>(a.dq.data) + 2 * 17 * 8 * 128 * 2 - 16 -
                                         (2 * 8 * 17 - 1) * 4);
  expect_invalid(a, "dq: overlaps lse");
  a.lse += 4;  // now it runs 4 bytes past dq's end: still over it
  expect_invalid(a, "dq: overlaps lse");
}

TEST(BwdValidation, TouchingViewsAreDisjoint) {
  BackwardArgs a = good();
  a.dq.data = static_cast<char*>(a.out.data) + 2 * 17 * 8 * 128 * 2;  // right after out
  a.lse = reinterpret_cast<const float*>(static_cast<char*>(a.dq.data) + 2 * 17 * 8 * 128 * 2);
  a.dk.data = reinterpret_cast<char*>(const_cast<float*>(a.lse)) + 2 * 8 * 17 * 4;  // after lse
  a.dv.data = static_cast<char*>(a.dk.data) + 2 * 33 * 2 * 128 * 2;                // after dk
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
}

TEST(BwdValidation, GradientsMustNotOverlapEachOther) {
  BackwardArgs a = good();
  a.dv = a.dk;
  expect_invalid(a, "dv: overlaps dk");
  a = good(2, 17, 17, 8, 8);
  a.dk.data = static_cast<char*>(a.dq.data) + 4096;
  expect_invalid(a, "dk: overlaps dq");
}

TEST(BwdValidation, GradientElementsMustNotAlias) {
  BackwardArgs a = good();
  a.dq.stride[1] = 0;  // every query row on the same bytes
  expect_invalid(a, "dq: elements overlap each other");
  a = good();
  a.dk.stride[2] = 64;  // head h's second half is head h+1's first half
  expect_invalid(a, "dk: elements overlap each other");
}

TEST(BwdValidation, PackedInputsAreAccepted) {
  // qkv in one (B, S, 3, H, D) buffer: the inputs overlap each other's extents, which is fine
  // (they are only read); the same for out and dout sharing one buffer.
  const int64_t B = 2, S = 64, H = 4, D = 128;
  BackwardArgs a = good(B, S, S, H, H, D);
  TensorRef* qkv[] = {&a.q, &a.k, &a.v};
  for (int i = 0; i < 3; ++i) {
    *qkv[i] = make_contiguous(region(1) + i * H * D * 2, DType::kFloat16, B, S, H, D);
    qkv[i]->stride[1] = 3 * H * D;
    qkv[i]->stride[0] = S * 3 * H * D;
  }
  a.dout = a.out;
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
}

TEST(BwdValidation, PackedGradientsWithDisjointSlicesAreAccepted) {
  const int64_t B = 2, S = 64, H = 4, D = 128;
  BackwardArgs a = good(B, S, S, H, H, D);
  for (int i = 0; i < 3; ++i) {
    TensorRef* g = grad(a, i);
    *g = make_contiguous(region(6) + i * H * D * 2, DType::kFloat16, B, S, H, D);
    g->stride[1] = 3 * H * D;
    g->stride[0] = S * 3 * H * D;
  }
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  // The same buffer holding (B, S, H, 3, D): slices interleave per head.
  for (int i = 0; i < 3; ++i) {
    TensorRef* g = grad(a, i);
    g->data = region(6) + i * D * 2;
    g->stride[2] = 3 * D;
    g->stride[1] = 3 * H * D;
    g->stride[0] = S * 3 * H * D;
  }
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  // Packed dkv next to a packed kv it must not touch: one slot off lands dv on dk.
  a.dv.data = region(6) + 1 * D * 2;
  expect_invalid(a, "dv: overlaps dk");
}

TEST(BwdValidation, GradientsInterleavedWithInputsAreAccepted) {
  // (B, S, H, 2, D): q in slot 0, dq in slot 1 of the same buffer.
  const int64_t B = 1, S = 32, H = 2, D = 64;
  BackwardArgs a = good(B, S, S, H, H, D);
  for (TensorRef* t : {&a.q, &a.dq}) {
    *t = make_contiguous(region(1) + (t == &a.dq ? D * 2 : 0), DType::kFloat16, B, S, H, D);
    t->stride[2] = 2 * D;
    t->stride[1] = 2 * H * D;
    t->stride[0] = S * 2 * H * D;
  }
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  a.dq.data = region(1) + D;  // half a row off: dq's rows now straddle q's
  expect_invalid(a, "dq: overlaps q");
}

TEST(BwdValidation, EmptyCallsWriteOnlyGradientsThatHaveElements) {
  // B == 0: nothing to read or write, any pointer goes and no device is needed.
  BackwardArgs a = good(0);
  for (TensorRef* t : {&a.dout, &a.q, &a.k, &a.v, &a.out, &a.dq, &a.dk, &a.dv}) t->data = nullptr;
  a.lse = nullptr;
  bool empty = false;
  EXPECT_TRUE(detail::validate_and_convert(a, nullptr, &empty).ok());
  EXPECT_TRUE(empty);
  EXPECT_TRUE(backward(a).ok()) << backward(a).message();

  // Sq == 0: inputs are not read (null is fine, overlap with them too) but dk, dv are zeroed.
  a = good(2, 0, 33);
  for (TensorRef* t : {&a.dout, &a.q, &a.k, &a.v, &a.out, &a.dq}) t->data = nullptr;
  a.lse = nullptr;
  a.dk.data = region(2);  // over k: k is not read
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  BackwardArgs bad = a;
  bad.dk.data = nullptr;
  expect_invalid(bad, "dk: null data pointer");
  bad = a;
  bad.dv.data = region(8) + 8;
  expect_invalid(bad, "dv: base pointer");
  bad = a;
  bad.dv = bad.dk;
  expect_invalid(bad, "dv: overlaps dk");
  bad = a;
  bad.dk.stride[1] = 0;
  expect_invalid(bad, "dk: elements overlap each other");

  // Sk == 0: dq is zeroed; dk and dv have no elements.
  a = good(2, 17, 0);
  a.dk.data = a.dv.data = nullptr;
  a.lse = nullptr;
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  bad = a;
  bad.dq.data = nullptr;
  expect_invalid(bad, "dq: null data pointer");
}

TEST(BwdValidation, EmptyCallWithGradientsNeedsADevice) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present (the GPU tests zero-fill real buffers)";
  BackwardArgs a = good(2, 0, 33);
  const Status s = backward(a);
  EXPECT_EQ(s.code(), StatusCode::kNoDevice) << s.message();
}

TEST(BwdValidation, ValidCallWithoutDeviceSaysSo) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present";
  const Status s = backward(good());
  EXPECT_EQ(s.code(), StatusCode::kNoDevice) << s.message();
  Backend b = Backend::kAuto;
  EXPECT_EQ(resolve_backend(good(), &b).code(), StatusCode::kNoDevice);
  EXPECT_EQ(resolve_backend(good(), nullptr).code(), StatusCode::kInvalidArgument);
}

// ---- overlap() and self_overlap() on raw byte sets ----

namespace {

ByteSet run(uintptr_t base, int64_t bytes) {
  ByteSet v;
  v.base = base;
  v.block = bytes;
  return v;
}

ByteSet strided(uintptr_t base, int64_t block, std::initializer_list<std::pair<int64_t, int64_t>> dims) {
  ByteSet v = run(base, block);
  for (auto [size, stride] : dims) {
    v.size[v.rank] = size;
    v.stride[v.rank++] = stride;
  }
  return v;
}

}  // namespace

TEST(BwdOverlap, Runs) {
  EXPECT_EQ(detail::overlap(run(1000, 100), run(1100, 10)), Overlap::kDisjoint);
  EXPECT_EQ(detail::overlap(run(1000, 100), run(1099, 10)), Overlap::kOverlap);
  EXPECT_EQ(detail::overlap(run(1000, 100), run(990, 10)), Overlap::kDisjoint);
  EXPECT_EQ(detail::overlap(run(1000, 100), run(991, 10)), Overlap::kOverlap);
  EXPECT_EQ(detail::overlap(run(1000, 0), run(1000, 10)), Overlap::kDisjoint);  // no bytes
}

TEST(BwdOverlap, LatticesOfDifferentSteps) {
  // 16-byte rows every 64 bytes against 8-byte rows every 96: whether some pair meets depends
  // on the second lattice's start; the answer is checked against every pair.
  const ByteSet a = strided(0, 16, {{100, 64}});
  int met = 0, missed = 0;
  for (uintptr_t start : {16u, 24u, 40u, 60u, 64u, 1000u, 1016u}) {
    const ByteSet b = strided(start, 8, {{60, 96}});
    bool brute = false;
    for (int i = 0; i < 100 && !brute; ++i)
      for (int j = 0; j < 60 && !brute; ++j) {
        const int64_t lo = std::max<int64_t>(64 * i, start + 96 * j);
        const int64_t hi = std::min<int64_t>(64 * i + 16, start + 96 * j + 8);
        brute = lo < hi;
      }
    (brute ? met : missed) += 1;
    EXPECT_EQ(detail::overlap(a, b), brute ? Overlap::kOverlap : Overlap::kDisjoint) << start;
    EXPECT_EQ(detail::overlap(b, a), brute ? Overlap::kOverlap : Overlap::kDisjoint) << start;
  }
  EXPECT_GT(met, 0);
  EXPECT_GT(missed, 0);
}

TEST(BwdOverlap, SameStepInterleaving) {
  const ByteSet a = strided(0, 32, {{1 << 20, 96}, {2, 1 << 30}});
  EXPECT_EQ(detail::overlap(a, strided(32, 64, {{1 << 20, 96}, {2, 1 << 30}})), Overlap::kDisjoint);
  EXPECT_EQ(detail::overlap(a, strided(31, 2, {{1 << 20, 96}})), Overlap::kOverlap);
  EXPECT_EQ(detail::overlap(a, strided(96 * 5 + 40, 2, {})), Overlap::kDisjoint);
  EXPECT_EQ(detail::overlap(a, strided((1 << 30) + 96 * 7 + 30, 2, {})), Overlap::kOverlap);
}

TEST(BwdOverlap, FineInterleavingIsUnknownNotWrong) {
  // 2-byte elements every 8 bytes vs every 4 bytes at +2 (odd multiples of 2 never hit a
  // multiple of 8): disjoint, but it takes one step per element to see it.
  const ByteSet a = strided(0, 2, {{1 << 20, 8}});
  const ByteSet b = strided(2, 2, {{1 << 21, 4}});
  EXPECT_EQ(detail::overlap(a, b), Overlap::kUnknown);
  EXPECT_EQ(detail::overlap(strided(0, 2, {{64, 8}}), strided(2, 2, {{128, 4}})), Overlap::kDisjoint);
}

TEST(BwdOverlap, SelfOverlap) {
  EXPECT_EQ(detail::self_overlap(strided(0, 2, {{2, 2048}, {8, 256}, {128, 2}})), Overlap::kDisjoint);
  EXPECT_EQ(detail::self_overlap(strided(0, 2, {{2, 2048}, {8, 0}, {128, 2}})), Overlap::kOverlap);
  EXPECT_EQ(detail::self_overlap(strided(0, 2, {{8, 0}, {1, 0}})), Overlap::kOverlap);
  EXPECT_EQ(detail::self_overlap(strided(0, 2, {{1, 0}, {64, 2}})), Overlap::kDisjoint);
  EXPECT_EQ(detail::self_overlap(strided(0, 2, {{8, 128}, {128, 2}})), Overlap::kOverlap);
  // Not nested (a step shorter than the span inside it) yet disjoint: 64-byte rows at
  // s * 128 + h * 192 for s < 3, h < 2 (offsets 0, 128, 192, 256, 320, 448).
  EXPECT_EQ(detail::self_overlap(strided(0, 64, {{3, 128}, {2, 192}})), Overlap::kDisjoint);
  EXPECT_EQ(detail::self_overlap(strided(0, 64, {{3, 128}, {2, 256}})), Overlap::kOverlap);
}

namespace {

// Every (element, byte) a view touches, for views small enough to list.
std::multiset<uintptr_t> bytes_of(const ByteSet& v) {
  std::multiset<uintptr_t> out;
  int64_t idx[4] = {0, 0, 0, 0};
  while (true) {
    uintptr_t at = v.base;
    for (int k = 0; k < v.rank; ++k) at += idx[k] * v.stride[k];
    for (int64_t i = 0; i < v.block; ++i) out.insert(at + i);
    int k = v.rank - 1;
    while (k >= 0 && ++idx[k] == v.size[k]) idx[k--] = 0;
    if (k < 0) return out;
  }
}

}  // namespace

TEST(BwdOverlap, MatchesBruteForceOnRandomViews) {
  std::mt19937 rng(1234);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto random_view = [&] {
    ByteSet v = run(pick(0, 96), pick(1, 12));
    v.rank = pick(0, 3);
    for (int k = 0; k < v.rank; ++k) {
      v.size[k] = pick(1, 4);
      v.stride[k] = pick(0, 5) == 0 ? 0 : pick(1, 48);
    }
    return v;
  };
  for (int trial = 0; trial < 20000; ++trial) {
    const ByteSet a = random_view(), b = random_view();
    const std::multiset<uintptr_t> ba = bytes_of(a), bb = bytes_of(b);
    bool shared = false;
    for (uintptr_t x : ba) shared = shared || bb.count(x) > 0;
    ASSERT_EQ(detail::overlap(a, b), shared ? Overlap::kOverlap : Overlap::kDisjoint) << trial;
    const std::set<uintptr_t> distinct(ba.begin(), ba.end());
    const bool aliased = distinct.size() != ba.size();
    ASSERT_EQ(detail::self_overlap(a), aliased ? Overlap::kOverlap : Overlap::kDisjoint) << trial;
  }
}

// ---- Varlen (BackwardArgs' cu_seqlens fields) ----

namespace {

// A packed call: every tensor (1, rows, H, D); the offsets are made-up aligned addresses
// (validation reads no device memory).
BackwardArgs good_varlen(int64_t total_q = 40, int64_t total_k = 50) {
  BackwardArgs a = good(1, total_q, total_k);
  a.cu_seqlens_q = reinterpret_cast<const int32_t*>(region(9));
  a.cu_seqlens_k = reinterpret_cast<const int32_t*>(region(10));
  a.num_seqs = 3;
  a.max_seqlen_q = 20;
  a.max_seqlen_k = 30;
  return a;
}

}  // namespace

TEST(BwdValidationVarlen, GoodArgumentsPassAndConvert) {
  const BackwardArgs a = good_varlen();
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  detail::BwdParams p;
  bool empty = true;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_FALSE(empty);
  EXPECT_TRUE(p.varlen());
  EXPECT_EQ(p.cu_q, a.cu_seqlens_q);
  EXPECT_EQ(p.cu_k, a.cu_seqlens_k);
  EXPECT_EQ(p.b, 3);
  EXPECT_EQ(p.sq, 20);
  EXPECT_EQ(p.sk, 30);
  EXPECT_EQ(p.total_q, 40);
  EXPECT_EQ(p.total_k, 50);
  // Max lengths above the packed rows are capped by them, as the forward's.
  BackwardArgs big = good_varlen();
  big.max_seqlen_q = 1000;
  ASSERT_TRUE(detail::validate_and_convert(big, &p, &empty).ok());
  EXPECT_EQ(p.sq, 40);
}

TEST(BwdValidationVarlen, BadArgumentsAreNamed) {
  BackwardArgs a = good_varlen();
  a.cu_seqlens_q = nullptr;
  expect_invalid(a, "cu_seqlens_q");
  a = good_varlen();
  a.cu_seqlens_k = nullptr;
  expect_invalid(a, "cu_seqlens_k");
  a = good_varlen();
  a.cu_seqlens_k = reinterpret_cast<const int32_t*>(region(10) + 2);
  expect_invalid(a, "cu_seqlens_k", "aligned");
  a = good_varlen();
  a.num_seqs = -1;
  expect_invalid(a, "num_seqs");
  a = good_varlen();
  a.max_seqlen_k = -4;
  expect_invalid(a, "max_seqlen_k");
  // Packed views: dim 0 is 1 for the inputs, and the gradients must match them.
  a = good_varlen();
  a.q = make_contiguous(region(1), DType::kFloat16, 2, 20, 8, 128);
  expect_invalid(a, "q", "dim 0 == 1");
  a = good_varlen();
  a.dq = make_contiguous(region(6), DType::kFloat16, 1, 41, 8, 128);
  expect_invalid(a, "dq: shape");
  a = good_varlen();
  a.dk = make_contiguous(region(7), DType::kFloat16, 2, 25, 2, 128);
  expect_invalid(a, "dk: shape");
  a = good_varlen();
  a.lse = nullptr;
  expect_invalid(a, "lse: null");
}

// zero_outside_rows is for varlen calls: accepted there (empty calls included), named on a
// dense call.
TEST(BwdValidationVarlen, ZeroOutsideRowsOnlyOnVarlenCalls) {
  BackwardArgs a = good_varlen();
  a.zero_outside_rows = true;
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  a.max_seqlen_q = 0;
  detail::BwdParams p;
  bool empty = false;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_TRUE(empty);
  BackwardArgs dense = good();
  dense.zero_outside_rows = true;
  expect_invalid(dense, "zero_outside_rows", "dense");
}

TEST(BwdValidationVarlen, CallsWithoutQueriesOrKeysAreEmpty) {
  for (int which = 0; which < 3; ++which) {
    BackwardArgs a = good_varlen();
    if (which == 0) a.max_seqlen_q = 0;  // no sequence has a query
    if (which == 1) a.num_seqs = 0;      // no sequence at all
    if (which == 2) a.max_seqlen_k = 0;  // no sequence has a key: dq rows are 0
    bool empty = false;
    detail::BwdParams p;
    ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok()) << which;
    EXPECT_TRUE(empty) << which;
  }
}

TEST(BwdValidationVarlen, SmallerBackwardParamsVersionsStayDense) {
  // A dense call is unchanged by the new fields' defaults.
  const BackwardArgs a = good();
  detail::BwdParams p;
  bool empty = true;
  ASSERT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_FALSE(p.varlen());
  EXPECT_EQ(p.b, 2);
}
