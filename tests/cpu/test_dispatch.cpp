// Backend choice for a given device capability (no GPU needed), and the no-device path.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/validate.h"

using namespace flashattn;
using detail::FwdParams;

namespace {

alignas(64) char g_buf[64];

FwdParams params(int d = 128) {
  ForwardArgs a;
  a.q = a.out = make_contiguous(g_buf, DType::kBFloat16, 1, 128, 4, d);
  a.k = a.v = make_contiguous(g_buf, DType::kBFloat16, 1, 128, 4, d);
  FwdParams p;
  bool empty = true;
  EXPECT_TRUE(detail::validate_and_convert(a, &p, &empty).ok());
  EXPECT_FALSE(empty);
  return p;
}

bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

}  // namespace

TEST(Dispatch, OldDeviceIsRejectedClearly) {
  Backend b;
  const Status s = detail::choose_backend(params(), Backend::kAuto, 7, 5, &b);
  EXPECT_EQ(s.code(), StatusCode::kNoDevice);
  EXPECT_NE(s.message().find("8.0 or newer"), std::string::npos) << s.message();
}

TEST(Dispatch, Sm90NeedsHopper) {
  Backend b;
  const Status s = detail::choose_backend(params(), Backend::kSm90, 8, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("sm90"), std::string::npos) << s.message();
}

TEST(Dispatch, ReferenceAlwaysAvailable) {
  Backend b = Backend::kAuto;
  EXPECT_TRUE(detail::choose_backend(params(), Backend::kReference, 8, 6, &b).ok());
  EXPECT_EQ(b, Backend::kReference);
}

TEST(Dispatch, AutoPicksAFamilyThatServesTheShape) {
  for (int d : {64, 96, 128, 192, 256}) {
    for (auto [maj, min] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{9, 0}}) {
      Backend b = Backend::kAuto;
      const FwdParams p = params(d);
      ASSERT_TRUE(detail::choose_backend(p, Backend::kAuto, maj, min, &b).ok());
      if (b == Backend::kSm90) {
        EXPECT_EQ(maj, 9);
        EXPECT_TRUE(detail::sm90_supports(p).ok());
      } else if (b == Backend::kSm80) {
        EXPECT_TRUE(detail::sm80_supports(p).ok());
      } else {
        EXPECT_EQ(b, Backend::kReference);
        EXPECT_FALSE(detail::sm80_supports(p).ok());
      }
    }
  }
}

TEST(Dispatch, UnsupportedBackendNamesItself) {
  // Whatever a family lacks, its refusal names the family.
  for (int d : {64, 96, 128, 192, 256}) {
    const Status s90 = detail::sm90_supports(params(d));
    if (!s90.ok()) {
      EXPECT_NE(s90.message().find("sm90"), std::string::npos) << s90.message();
    }
    const Status s80 = detail::sm80_supports(params(d));
    if (!s80.ok()) {
      EXPECT_NE(s80.message().find("sm80"), std::string::npos) << s80.message();
    }
  }
}

TEST(Dispatch, NoDeviceGivesOneClearError) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present";
  ForwardArgs a;
  a.q = a.out = make_contiguous(g_buf, DType::kFloat16, 1, 8, 1, 64);
  a.k = a.v = make_contiguous(g_buf, DType::kFloat16, 1, 8, 1, 64);
  const Status s = forward(a);
  EXPECT_EQ(s.code(), StatusCode::kNoDevice);
  EXPECT_NE(s.message().find("compute capability 8.0"), std::string::npos) << s.message();
}
