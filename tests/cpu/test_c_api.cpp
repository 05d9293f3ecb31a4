// The C ABI mirrors the C++ API: codes, thread-local last error, version.
#include <gtest/gtest.h>

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
