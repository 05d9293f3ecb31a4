// The C ABI mirrors the C++ API: codes, thread-local last error, version; and the versioned
// params struct's size rule (flashattn_c.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "flashattn/flashattn.h"
#include "flashattn/flashattn_c.h"

namespace {

alignas(64) char g_buf[64];

flashattn_tensor_t tensor(int64_t b, int64_t s, int64_t h, int64_t d, int dtype = FLASHATTN_BF16) {
  flashattn_tensor_t t{};
  t.data = g_buf;
  t.dtype = dtype;
  t.shape[0] = b; t.shape[1] = s; t.shape[2] = h; t.shape[3] = d;
  t.stride[3] = 1; t.stride[2] = d; t.stride[1] = h * d; t.stride[0] = s * h * d;
  return t;
}

bool contains(const char* haystack, const char* needle) {
  return std::string(haystack).find(needle) != std::string::npos;
}

// A valid call (in validation's eyes) with batch b; b = 0 launches nothing and needs no device.
flashattn_forward_params_t params(int64_t b = 1) {
  flashattn_forward_params_t p;
  flashattn_forward_params_init(&p);
  p.q = p.k = p.v = p.out = tensor(b, 8, 4, 64);
  return p;
}

// What a caller compiled against version 1 of flashattn_c.h has: exactly its fields.
struct ParamsV1 {
  size_t struct_size;
  flashattn_tensor_t q, k, v, out;
  float* lse;
  float softmax_scale;
  int32_t causal;
  int32_t backend;
  uint32_t reserved0;
};

// A caller compiled against a newer header with fields this library does not know.
struct ParamsNewer {
  flashattn_forward_params_t known;
  uint64_t newer_fields[3];
};

}  // namespace

TEST(CApi, VersionMatchesCpp) { EXPECT_STREQ(flashattn_version(), flashattn::version()); }

TEST(CApi, InvalidArgumentRoundTrip) {
  flashattn_tensor_t q = tensor(1, 8, 4, 64), k = tensor(1, 8, 3, 64), v = k, o = q;
  const int rc = flashattn_forward(&q, &k, &v, &o, nullptr, 0.f, 0, FLASHATTN_BACKEND_AUTO, nullptr);
  EXPECT_EQ(rc, FLASHATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashattn_last_error()).find("must divide"), std::string::npos)
      << flashattn_last_error();
}

TEST(CApi, NullDescriptorAndUnknownDtype) {
  flashattn_tensor_t q = tensor(1, 8, 4, 64);
  EXPECT_EQ(flashattn_forward(&q, nullptr, &q, &q, nullptr, 0.f, 0, 0, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashattn_last_error()).find("k:"), std::string::npos);
  flashattn_tensor_t bad = tensor(1, 8, 4, 64, 17);
  EXPECT_EQ(flashattn_forward(&q, &bad, &q, &q, nullptr, 0.f, 0, 0, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashattn_last_error()).find("dtype"), std::string::npos);
}

TEST(CApi, LastErrorIsThreadLocal) {
  flashattn_tensor_t q = tensor(1, 8, 4, 100), o = q;
  ASSERT_NE(flashattn_forward(&q, &q, &q, &o, nullptr, 0.f, 0, 0, nullptr), FLASHATTN_OK);
  const std::string here = flashattn_last_error();
  std::string there = "unset";
  std::thread([&] { there = flashattn_last_error(); }).join();
  EXPECT_NE(here.find("head dim"), std::string::npos);
  EXPECT_EQ(there, "");
}

TEST(CApi, EmptyCallSucceeds) {
  flashattn_tensor_t q = tensor(0, 8, 4, 64), o = q;
  q.data = o.data = nullptr;
  EXPECT_EQ(flashattn_forward(&q, &q, &q, &o, nullptr, 0.f, 1, 0, nullptr), FLASHATTN_OK);
}

TEST(CApi, ResolveBackendMatchesCpp) {
  flashattn_tensor_t q = tensor(1, 8, 4, 64), o = q;
  int chosen = -1;
  flashattn::ForwardArgs a;
  a.q = a.k = a.v = a.out = flashattn::make_contiguous(g_buf, flashattn::DType::kBFloat16, 1, 8, 4, 64);
  flashattn::Backend b;
  const flashattn::Status s = flashattn::resolve_backend(a, &b);
  const int rc = flashattn_resolve_backend(&q, &q, &q, &o, nullptr, 0.f, 0, 0, &chosen);
  EXPECT_EQ(rc, static_cast<int>(s.code()));
  if (s.ok()) {
    EXPECT_EQ(chosen, static_cast<int>(b));
  } else {
    EXPECT_EQ(std::string(flashattn_last_error()), s.message());
  }
}

TEST(CApiParams, LayoutAndSize) {
  EXPECT_EQ(flashattn_forward_params_size(), sizeof(flashattn_forward_params_t));
  EXPECT_EQ(sizeof(ParamsV1), FLASHATTN_FORWARD_PARAMS_SIZE_V1);
  EXPECT_EQ(offsetof(ParamsV1, reserved0), offsetof(flashattn_forward_params_t, reserved0));
  EXPECT_EQ(offsetof(ParamsV1, lse), offsetof(flashattn_forward_params_t, lse));
  flashattn_forward_params_t p;
  std::memset(&p, 0xab, sizeof p);
  flashattn_forward_params_init(&p);
  EXPECT_EQ(p.struct_size, sizeof p);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.softmax_scale, 0.f);
  EXPECT_EQ(p.causal, 0);
  EXPECT_EQ(p.backend, FLASHATTN_BACKEND_AUTO);
  EXPECT_EQ(p.reserved0, 0u);
}

TEST(CApiParams, NullParams) {
  int chosen = -1;
  EXPECT_EQ(flashattn_forward_ex(nullptr, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "params: null")) << flashattn_last_error();
  EXPECT_EQ(flashattn_resolve_backend_ex(nullptr, &chosen), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "params: null")) << flashattn_last_error();
}

TEST(CApiParams, TooSmallStructSize) {
  for (size_t size : {size_t{0}, sizeof(size_t), FLASHATTN_FORWARD_PARAMS_SIZE_V1 - 8}) {
    flashattn_forward_params_t p = params(0);
    p.struct_size = size;
    EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT) << size;
    EXPECT_TRUE(contains(flashattn_last_error(), "params.struct_size")) << flashattn_last_error();
    EXPECT_TRUE(contains(flashattn_last_error(), "smaller than the first version"))
        << flashattn_last_error();
  }
}

TEST(CApiParams, ImplausiblyLargeStructSize) {
  flashattn_forward_params_t p = params(0);
  p.struct_size = size_t{1} << 40;  // garbage: never read past the struct
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "params.struct_size")) << flashattn_last_error();
}

TEST(CApiParams, NewerCallerWithUnknownFields) {
  ParamsNewer n{};
  n.known = params(0);
  n.known.struct_size = sizeof n;
  // Fields past what this library knows, left zero, mean "not used": accepted.
  EXPECT_EQ(flashattn_forward_ex(&n.known, nullptr), FLASHATTN_OK) << flashattn_last_error();
  // A non-zero one asks for something this library cannot do: rejected, naming the byte.
  n.newer_fields[1] = 7;
  EXPECT_EQ(flashattn_forward_ex(&n.known, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "params.struct_size")) << flashattn_last_error();
  EXPECT_TRUE(contains(flashattn_last_error(), "not zero")) << flashattn_last_error();
}

TEST(CApiParams, ReservedMustBeZero) {
  flashattn_forward_params_t p = params(0);
  p.reserved0 = 1;
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "reserved0")) << flashattn_last_error();
}

TEST(CApiParams, VersionTwoCarriesVarlen) {
  EXPECT_LT(FLASHATTN_FORWARD_PARAMS_SIZE_V2, sizeof(flashattn_forward_params_t));
  EXPECT_EQ(FLASHATTN_FORWARD_PARAMS_SIZE_V2 % 8, 0u);
  flashattn_forward_params_t p = params(0);
  p.reserved1 = 1;
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "reserved1")) << flashattn_last_error();
  // The varlen fields reach validation: a half-set varlen call is named.
  alignas(16) static int32_t cu[4] = {0, 0, 0, 0};
  p = params(1);
  p.cu_seqlens_q = cu;
  p.num_seqs = 2;
  p.max_seqlen_q = 4;
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "cu_seqlens_k")) << flashattn_last_error();
}

TEST(CApiParams, VersionThreeCarriesWindowSoftcapAlibi) {
  EXPECT_EQ(FLASHATTN_FORWARD_PARAMS_SIZE_V3, sizeof(flashattn_forward_params_t));
  EXPECT_EQ(FLASHATTN_BACKWARD_PARAMS_SIZE_V2 % 8, 0u);
  flashattn_forward_params_t p = params(1);
  p.reserved2 = 1;
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "reserved2")) << flashattn_last_error();
  // Stored plus one: 0 is unbounded, -1 would be the invalid window -2.
  p = params(1);
  p.window_left_plus1 = -1;
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "window_left: -2")) << flashattn_last_error();
  p = params(1);
  p.softcap = -1.f;
  EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "softcap")) << flashattn_last_error();
}

TEST(CApiParams, BadTensorsAreNamed) {
  struct Case {
    const char* needle;
    void (*spoil)(flashattn_forward_params_t*);
  };
  const Case cases[] = {
      {"q: null data pointer", [](flashattn_forward_params_t* p) { p->q.data = nullptr; }},
      {"k: unknown dtype", [](flashattn_forward_params_t* p) { p->k.dtype = 42; }},
      {"q: head dim", [](flashattn_forward_params_t* p) { p->q = p->k = tensor(1, 8, 4, 264); }},
      {"q: head dim", [](flashattn_forward_params_t* p) { p->q = p->k = tensor(1, 8, 4, 4); }},
      {"v: head dim", [](flashattn_forward_params_t* p) { p->v = p->out = tensor(1, 8, 4, 12); }},
      {"out: shape", [](flashattn_forward_params_t* p) { p->out = tensor(1, 9, 4, 64); }},
      // v with its own head dim is fine; out must then take it.
      {"out: shape", [](flashattn_forward_params_t* p) { p->v = tensor(1, 8, 4, 128); }},
      {"k: heads", [](flashattn_forward_params_t* p) { p->k = p->v = tensor(1, 8, 3, 64); }},
      {"softmax_scale", [](flashattn_forward_params_t* p) { p->softmax_scale = -1.f; }},
      {"backend", [](flashattn_forward_params_t* p) { p->backend = 99; }},
  };
  for (const Case& c : cases) {
    flashattn_forward_params_t p = params();
    c.spoil(&p);
    EXPECT_EQ(flashattn_forward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT) << c.needle;
    EXPECT_TRUE(contains(flashattn_last_error(), c.needle)) << c.needle << " / " << flashattn_last_error();
  }
}

TEST(CApiParams, ValueHeadDimMayDiffer) {
  // q/k 192 with v/out 128, and odd multiples of 8: accepted by validation, so the call gets as
  // far as the C++ API does for the same arguments (on a machine without a GPU, both say so).
  for (auto [d, dv] : {std::pair<int64_t, int64_t>{192, 128}, {64, 128}, {40, 24}, {200, 200}}) {
    flashattn_forward_params_t p = params();
    p.q = p.k = tensor(1, 8, 4, d);
    p.v = p.out = tensor(1, 8, 4, dv);
    flashattn::ForwardArgs a;
    a.q = a.k = flashattn::make_contiguous(g_buf, flashattn::DType::kBFloat16, 1, 8, 4, d);
    a.v = a.out = flashattn::make_contiguous(g_buf, flashattn::DType::kBFloat16, 1, 8, 4, dv);
    flashattn::Backend b;
    const flashattn::Status s = flashattn::resolve_backend(a, &b);
    EXPECT_NE(s.code(), flashattn::StatusCode::kInvalidArgument)
        << d << "/" << dv << ": " << s.message();
    int chosen = -1;
    EXPECT_EQ(flashattn_resolve_backend_ex(&p, &chosen), static_cast<int>(s.code()))
        << d << "/" << dv;
    if (s.ok()) {
      EXPECT_EQ(chosen, static_cast<int>(b));
    } else {
      EXPECT_EQ(std::string(flashattn_last_error()), s.message());
    }
  }
}

TEST(CApiParams, OldCallerIsAccepted) {
  ParamsV1 old;
  std::memset(&old, 0, sizeof old);
  old.struct_size = sizeof old;
  old.q = old.k = old.v = old.out = tensor(0, 8, 4, 64);
  old.causal = 1;
  const auto* as_params = reinterpret_cast<const flashattn_forward_params_t*>(&old);
  EXPECT_EQ(flashattn_forward_ex(as_params, nullptr), FLASHATTN_OK) << flashattn_last_error();

  // Non-empty: resolves exactly as the C++ API does (no launch; on a machine without a GPU
  // both report the missing device after validation).
  old.q = old.k = old.v = old.out = tensor(1, 8, 4, 64);
  int chosen = -1;
  flashattn::ForwardArgs a;
  a.q = a.k = a.v = a.out = flashattn::make_contiguous(g_buf, flashattn::DType::kBFloat16, 1, 8, 4, 64);
  a.causal = true;
  flashattn::Backend b;
  const flashattn::Status s = flashattn::resolve_backend(a, &b);
  EXPECT_EQ(flashattn_resolve_backend_ex(as_params, &chosen), static_cast<int>(s.code()));
  if (s.ok()) {
    EXPECT_EQ(chosen, static_cast<int>(b));
  } else {
    EXPECT_EQ(std::string(flashattn_last_error()), s.message());
  }
}

TEST(CApiParams, PositionalFormMatchesStructForm) {
  flashattn_forward_params_t p = params();
  p.k = p.v = tensor(1, 8, 3, 64);
  const int rc_ex = flashattn_forward_ex(&p, nullptr);
  const std::string msg_ex = flashattn_last_error();
  const int rc = flashattn_forward(&p.q, &p.k, &p.v, &p.out, nullptr, 0.f, 0, 0, nullptr);
  EXPECT_EQ(rc, rc_ex);
  EXPECT_EQ(rc, FLASHATTN_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(flashattn_last_error()), msg_ex);
}

// ---- Backward: flashattn_backward_params_t ----

namespace {

// Made-up, disjoint, aligned addresses: validation reads no tensor memory.
char* region(int i) { return reinterpret_cast<char*>((uintptr_t{1} << 44) + (uintptr_t{1} << 40) * i); }

flashattn_tensor_t at(int i, int64_t b, int64_t s, int64_t h, int64_t d) {
  flashattn_tensor_t t = tensor(b, s, h, d);
  t.data = region(i);
  return t;
}

// A call validation accepts; b = 0 launches nothing and needs no device. q, k, dq, dk are
// (.., d); v, out, dout, dv (.., dv).
flashattn_backward_params_t bwd_params(int64_t b = 1, int64_t d = 64, int64_t dv = 64) {
  flashattn_backward_params_t p;
  flashattn_backward_params_init(&p);
  p.dout = at(0, b, 8, 4, dv);
  p.q = at(1, b, 8, 4, d);
  p.k = at(2, b, 8, 2, d);
  p.v = at(3, b, 8, 2, dv);
  p.out = at(4, b, 8, 4, dv);
  p.lse = reinterpret_cast<const float*>(region(5));
  p.dq = at(6, b, 8, 4, d);
  p.dk = at(7, b, 8, 2, d);
  p.dv = at(8, b, 8, 2, dv);
  return p;
}

flashattn::TensorRef ref(const flashattn_tensor_t& t) {
  return flashattn::make_contiguous(t.data, static_cast<flashattn::DType>(t.dtype), t.shape[0],
                                    t.shape[1], t.shape[2], t.shape[3]);
}

flashattn::BackwardArgs cpp_args(const flashattn_backward_params_t& p) {
  flashattn::BackwardArgs a;
  a.dout = ref(p.dout); a.q = ref(p.q); a.k = ref(p.k); a.v = ref(p.v); a.out = ref(p.out);
  a.lse = p.lse;
  a.dq = ref(p.dq); a.dk = ref(p.dk); a.dv = ref(p.dv);
  a.softmax_scale = p.softmax_scale;
  a.causal = p.causal != 0;
  a.deterministic = p.deterministic != 0;
  a.backend = static_cast<flashattn::Backend>(p.backend);
  return a;
}

// Version 1 as a caller compiled against it has it.
struct BwdParamsV1 {
  size_t struct_size;
  flashattn_tensor_t dout, q, k, v, out;
  const float* lse;
  flashattn_tensor_t dq, dk, dv;
  float softmax_scale;
  int32_t causal;
  int32_t deterministic;
  int32_t backend;
};

struct BwdParamsNewer {
  flashattn_backward_params_t known;
  uint64_t newer_fields[2];
};

}  // namespace

TEST(CApiBwdParams, LayoutAndSize) {
  EXPECT_EQ(flashattn_backward_params_size(), sizeof(flashattn_backward_params_t));
  EXPECT_EQ(sizeof(BwdParamsV1), FLASHATTN_BACKWARD_PARAMS_SIZE_V1);
  EXPECT_EQ(FLASHATTN_BACKWARD_PARAMS_SIZE_V1 % 8, 0u);
  EXPECT_EQ(offsetof(BwdParamsV1, lse), offsetof(flashattn_backward_params_t, lse));
  EXPECT_EQ(offsetof(BwdParamsV1, dv), offsetof(flashattn_backward_params_t, dv));
  EXPECT_EQ(offsetof(BwdParamsV1, backend), offsetof(flashattn_backward_params_t, backend));
  flashattn_backward_params_t p;
  std::memset(&p, 0xab, sizeof p);
  flashattn_backward_params_init(&p);
  EXPECT_EQ(p.struct_size, sizeof p);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.softmax_scale, 0.f);
  EXPECT_EQ(p.causal, 0);
  EXPECT_EQ(p.deterministic, 0);
  EXPECT_EQ(p.backend, FLASHATTN_BACKEND_AUTO);
}

TEST(CApiBwdParams, NullParamsAndChosen) {
  int chosen = -1;
  EXPECT_EQ(flashattn_backward_ex(nullptr, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "params: null")) << flashattn_last_error();
  EXPECT_EQ(flashattn_resolve_backward_backend_ex(nullptr, &chosen), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "params: null")) << flashattn_last_error();
  const flashattn_backward_params_t p = bwd_params();
  EXPECT_EQ(flashattn_resolve_backward_backend_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "chosen: null")) << flashattn_last_error();
}

TEST(CApiBwdParams, TooSmallStructSize) {
  for (size_t size : {size_t{0}, sizeof(size_t), FLASHATTN_BACKWARD_PARAMS_SIZE_V1 - 8,
                      FLASHATTN_BACKWARD_PARAMS_SIZE_V1 - 1}) {
    flashattn_backward_params_t p = bwd_params(0);
    p.struct_size = size;
    EXPECT_EQ(flashattn_backward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT) << size;
    EXPECT_TRUE(contains(flashattn_last_error(), "params.struct_size")) << flashattn_last_error();
    EXPECT_TRUE(contains(flashattn_last_error(), "smaller than the first version"))
        << flashattn_last_error();
    EXPECT_TRUE(contains(flashattn_last_error(), "flashattn_backward_params_init"))
        << flashattn_last_error();
  }
}

TEST(CApiBwdParams, OnlyVersionSizesUpToSizeof) {
  // Every size from the first version to this header's sizeof: accepted exactly at a version's
  // size, rejected between two.
  for (size_t size = FLASHATTN_BACKWARD_PARAMS_SIZE_V1; size <= sizeof(flashattn_backward_params_t);
       ++size) {
    BwdParamsNewer n{};
    n.known = bwd_params(0);
    n.known.struct_size = size;
    const int rc = flashattn_backward_ex(&n.known, nullptr);
    if (size == FLASHATTN_BACKWARD_PARAMS_SIZE_V1 || size == FLASHATTN_BACKWARD_PARAMS_SIZE_V2 ||
        size == sizeof(flashattn_backward_params_t)) {
      EXPECT_EQ(rc, FLASHATTN_OK) << size << ": " << flashattn_last_error();
    } else {
      EXPECT_EQ(rc, FLASHATTN_INVALID_ARGUMENT) << size;
      EXPECT_TRUE(contains(flashattn_last_error(), "not the size of any version of "
                                                   "flashattn_backward_params_t"))
          << flashattn_last_error();
    }
  }
}

TEST(CApiBwdParams, ImplausiblyLargeStructSize) {
  for (size_t size : {size_t{FLASHATTN_PARAMS_MAX_SIZE} + 8, size_t{1} << 40}) {
    flashattn_backward_params_t p = bwd_params(0);
    p.struct_size = size;  // garbage: never read past the struct
    EXPECT_EQ(flashattn_backward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(flashattn_last_error(), "params.struct_size")) << flashattn_last_error();
    EXPECT_TRUE(contains(flashattn_last_error(), "exceeds")) << flashattn_last_error();
  }
}

TEST(CApiBwdParams, NewerCallerWithUnknownFields) {
  BwdParamsNewer n{};
  n.known = bwd_params(0);
  for (size_t extra : {size_t{4}, size_t{8}, sizeof n.newer_fields}) {
    n.known.struct_size = sizeof n.known + extra;
    EXPECT_EQ(flashattn_backward_ex(&n.known, nullptr), FLASHATTN_OK) << flashattn_last_error();
    int chosen = -1;
    const int rc = flashattn_resolve_backward_backend_ex(&n.known, &chosen);
    EXPECT_NE(rc, FLASHATTN_INVALID_ARGUMENT) << flashattn_last_error();
  }
  n.known.struct_size = sizeof n;
  reinterpret_cast<unsigned char*>(n.newer_fields)[9] = 1;
  EXPECT_EQ(flashattn_backward_ex(&n.known, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "not zero")) << flashattn_last_error();
  EXPECT_TRUE(contains(flashattn_last_error(),
                       ("byte " + std::to_string(sizeof n.known + 9)).c_str()))
      << flashattn_last_error();
  int chosen = -1;
  EXPECT_EQ(flashattn_resolve_backward_backend_ex(&n.known, &chosen), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_EQ(chosen, -1);
}

TEST(CApiBwdParams, OldCallerIsAccepted) {
  BwdParamsV1 old;
  std::memset(&old, 0, sizeof old);
  old.struct_size = sizeof old;
  const flashattn_backward_params_t p = bwd_params(0);
  old.dout = p.dout; old.q = p.q; old.k = p.k; old.v = p.v; old.out = p.out;
  old.dq = p.dq; old.dk = p.dk; old.dv = p.dv;
  old.deterministic = 1;
  const auto* as_params = reinterpret_cast<const flashattn_backward_params_t*>(&old);
  EXPECT_EQ(flashattn_backward_ex(as_params, nullptr), FLASHATTN_OK) << flashattn_last_error();
}

TEST(CApiBwdParams, VersionThreeCarriesVarlen) {
  EXPECT_EQ(FLASHATTN_BACKWARD_PARAMS_SIZE_V3, sizeof(flashattn_backward_params_t));
  flashattn_backward_params_t p = bwd_params();
  // zero_outside_rows (once reserved1) reaches validation: a dense call that sets it is named.
  p.zero_outside_rows = 1;
  EXPECT_EQ(flashattn_backward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "zero_outside_rows")) << flashattn_last_error();
  // The varlen fields reach validation: a call with cu_seqlens_k but no cu_seqlens_q is named.
  p = bwd_params();
  p.cu_seqlens_k = reinterpret_cast<const int32_t*>(region(9));
  p.num_seqs = 2;
  EXPECT_EQ(flashattn_backward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(flashattn_last_error(), "cu_seqlens_q")) << flashattn_last_error();
  // Packed tensors (dim 0 == 1) with offsets: valid; with num_seqs 0 nothing is written, so no
  // device is needed.
  p = bwd_params();
  p.cu_seqlens_q = reinterpret_cast<const int32_t*>(region(9));
  p.cu_seqlens_k = reinterpret_cast<const int32_t*>(region(10));
  p.max_seqlen_q = p.max_seqlen_k = 8;
  int chosen = -1;
  EXPECT_NE(flashattn_resolve_backward_backend_ex(&p, &chosen), FLASHATTN_INVALID_ARGUMENT) << flashattn_last_error();
}

TEST(CApiBwdParams, BadArgumentsAreNamed) {
  struct Case {
    const char* needle;
    void (*spoil)(flashattn_backward_params_t*);
  };
  const Case cases[] = {
      {"lse: null pointer", [](flashattn_backward_params_t* p) { p->lse = nullptr; }},
      {"dout: unknown dtype", [](flashattn_backward_params_t* p) { p->dout.dtype = 42; }},
      {"dv: unknown dtype", [](flashattn_backward_params_t* p) { p->dv.dtype = -1; }},
      {"dq: unsupported dtype float32", [](flashattn_backward_params_t* p) { p->dq.dtype = FLASHATTN_FP32; }},
      {"dk: shape", [](flashattn_backward_params_t* p) { p->dk = at(7, 1, 9, 2, 64); }},
      {"dout: shape", [](flashattn_backward_params_t* p) { p->dout = at(0, 1, 8, 4, 128); }},
      {"out's", [](flashattn_backward_params_t* p) { p->dout = at(0, 1, 8, 4, 128); }},
      {"q: head dim", [](flashattn_backward_params_t* p) {
         p->q = at(1, 1, 8, 4, 12);
         p->k = at(2, 1, 8, 2, 12);
         p->dq = at(6, 1, 8, 4, 12);
         p->dk = at(7, 1, 8, 2, 12);
       }},
      // v's own head dim: out, dout and dv must take it.
      {"out: shape", [](flashattn_backward_params_t* p) { p->v = at(3, 1, 8, 2, 128); }},
      {"dv: shape", [](flashattn_backward_params_t* p) {
         p->v = at(3, 1, 8, 2, 128);
         p->out = at(4, 1, 8, 4, 128);
         p->dout = at(0, 1, 8, 4, 128);
       }},
      {"dq: null data pointer", [](flashattn_backward_params_t* p) { p->dq.data = nullptr; }},
      {"dk: overlaps v", [](flashattn_backward_params_t* p) { p->dk.data = p->v.data; }},
      {"dv: overlaps dk", [](flashattn_backward_params_t* p) { p->dv.data = p->dk.data; }},
      {"k: heads", [](flashattn_backward_params_t* p) {
         p->k = p->v = at(2, 1, 8, 3, 64);
         p->dk = at(7, 1, 8, 3, 64);
         p->dv = at(8, 1, 8, 3, 64);
       }},
      {"softmax_scale", [](flashattn_backward_params_t* p) { p->softmax_scale = -1.f; }},
      {"backend", [](flashattn_backward_params_t* p) { p->backend = 99; }},
      {"backend", [](flashattn_backward_params_t* p) { p->backend = -1; }},
  };
  for (const Case& c : cases) {
    flashattn_backward_params_t p = bwd_params();
    c.spoil(&p);
    EXPECT_EQ(flashattn_backward_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT) << c.needle;
    EXPECT_TRUE(contains(flashattn_last_error(), c.needle)) << c.needle << " / " << flashattn_last_error();
    int chosen = -1;
    EXPECT_EQ(flashattn_resolve_backward_backend_ex(&p, &chosen), FLASHATTN_INVALID_ARGUMENT);
    EXPECT_EQ(chosen, -1);
  }
}

TEST(CApiBwdParams, ValueHeadDimMayDiffer) {
  // q/k 192 with v 128 (and v wider than q/k): validation accepts, and resolve answers as the
  // C++ API does.
  for (auto [d, dv] : {std::pair<int64_t, int64_t>{192, 128}, {64, 128}, {40, 24}}) {
    const flashattn_backward_params_t p = bwd_params(1, d, dv);
    flashattn::Backend b = flashattn::Backend::kAuto;
    const flashattn::Status s = flashattn::resolve_backend(cpp_args(p), &b);
    EXPECT_NE(s.code(), flashattn::StatusCode::kInvalidArgument)
        << d << "/" << dv << ": " << s.message();
    int chosen = -1;
    EXPECT_EQ(flashattn_resolve_backward_backend_ex(&p, &chosen), static_cast<int>(s.code()));
    if (s.ok()) {
      EXPECT_EQ(chosen, static_cast<int>(b));
    } else {
      EXPECT_EQ(std::string(flashattn_last_error()), s.message());
    }
  }
}

TEST(CApiBwdParams, MatchesCpp) {
  // The struct carries causal, deterministic and the backend through: resolve answers as the
  // C++ API does for the same arguments (on a machine without a GPU, both say so).
  for (int backend : {FLASHATTN_BACKEND_AUTO, FLASHATTN_BACKEND_REFERENCE, FLASHATTN_BACKEND_SM80}) {
    flashattn_backward_params_t p = bwd_params();
    p.causal = 1;
    p.deterministic = 1;
    p.backend = backend;
    flashattn::Backend b = flashattn::Backend::kAuto;
    const flashattn::Status s = flashattn::resolve_backend(cpp_args(p), &b);
    int chosen = -1;
    EXPECT_EQ(flashattn_resolve_backward_backend_ex(&p, &chosen), static_cast<int>(s.code()));
    if (s.ok()) {
      EXPECT_EQ(chosen, static_cast<int>(b));
    } else {
      EXPECT_EQ(std::string(flashattn_last_error()), s.message());
    }
  }
}
