// The C ABI mirrors the C++ API: codes, thread-local last error, version; and the versioned
// params struct's size rule (flashattn_c.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

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

TEST(CApiParams, BadTensorsAreNamed) {
  struct Case {
    const char* needle;
    void (*spoil)(flashattn_forward_params_t*);
  };
  const Case cases[] = {
      {"q: null data pointer", [](flashattn_forward_params_t* p) { p->q.data = nullptr; }},
      {"k: unknown dtype", [](flashattn_forward_params_t* p) { p->k.dtype = 42; }},
      {"v: head dim", [](flashattn_forward_params_t* p) { p->v = tensor(1, 8, 4, 128); }},
      {"out: shape", [](flashattn_forward_params_t* p) { p->out = tensor(1, 9, 4, 64); }},
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
