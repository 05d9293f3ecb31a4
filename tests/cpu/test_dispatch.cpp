// Backend choice for a given device capability (no GPU needed), the no-device path, and the
// per-device info cache dispatch reads the capability from.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/backends.h"
#include "api/validate.h"
#include "common/device_info.h"

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

TEST(Dispatch, ForcedBackendIsStillChecked) {
  // forward() with a forced family goes through choose_backend too, so the family's
  // supports() still refuses what it cannot run (its forward() trusts that).
  Backend b = Backend::kAuto;
  Status s = detail::choose_backend(params(96), Backend::kSm90, 9, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("sm90"), std::string::npos) << s.message();
  s = detail::choose_backend(params(96), Backend::kSm80, 8, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("sm80"), std::string::npos) << s.message();
  EXPECT_EQ(b, Backend::kAuto);  // untouched on refusal
}

TEST(Dispatch, NoDeviceInfoWithoutAGpu) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present";
  detail::DeviceInfo info;
  const Status s = detail::current_device_info(&info);
  EXPECT_EQ(s.code(), StatusCode::kNoDevice);
  EXPECT_NE(s.message().find("compute capability 8.0"), std::string::npos) << s.message();
}

TEST(Dispatch, RepeatedCallsReadTheDeviceInfoCache) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  ForwardArgs a;
  a.q = a.k = a.v = a.out = make_contiguous(g_buf, DType::kFloat16, 1, 8, 1, 64);
  Backend b;
  ASSERT_TRUE(resolve_backend(a, &b).ok());  // fills the cache for the current device
  const int before = detail::device_info_query_count();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(resolve_backend(a, &b).ok());
  EXPECT_EQ(detail::device_info_query_count(), before);
}

namespace {

std::atomic<int> g_fake_queries{0};
std::atomic<bool> g_fake_fails{false};

Status fake_query(int index, detail::DeviceInfo* out) {
  g_fake_queries.fetch_add(1);
  if (g_fake_fails.load()) return {StatusCode::kNoDevice, "fake: no device"};
  out->index = index;
  out->major = 9;
  out->minor = 0;
  out->sm_count = 100 + index;
  out->smem_optin = 227 * 1024;
  return Status::Ok();
}

}  // namespace

TEST(DeviceInfoCache, QueriesEachDeviceOnce) {
  g_fake_queries = 0;
  g_fake_fails = false;
  detail::DeviceInfoCache cache(&fake_query);
  detail::DeviceInfo info;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cache.get(0, &info).ok());
    EXPECT_EQ(info.sm_count, 100);
    EXPECT_EQ(info.sm(), 90);
  }
  ASSERT_TRUE(cache.get(3, &info).ok());
  EXPECT_EQ(info.index, 3);
  EXPECT_EQ(info.sm_count, 103);
  ASSERT_TRUE(cache.get(0, &info).ok());
  EXPECT_EQ(info.index, 0);
  EXPECT_EQ(cache.query_count(), 2);
  EXPECT_EQ(g_fake_queries.load(), 2);
}

TEST(DeviceInfoCache, FailureIsNotCached) {
  g_fake_fails = true;
  detail::DeviceInfoCache cache(&fake_query);
  detail::DeviceInfo info;
  EXPECT_EQ(cache.get(1, &info).code(), StatusCode::kNoDevice);
  g_fake_fails = false;
  EXPECT_TRUE(cache.get(1, &info).ok());
  EXPECT_TRUE(cache.get(1, &info).ok());
  EXPECT_EQ(cache.query_count(), 2);  // the failed query, then one that stuck
}

TEST(DeviceInfoCache, ConcurrentFirstCallsQueryOnce) {
  g_fake_fails = false;
  detail::DeviceInfoCache cache(&fake_query);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      detail::DeviceInfo info;
      for (int i = 0; i < 100; ++i)
        if (cache.get(2, &info).ok() && info.sm_count == 102) ok.fetch_add(1);
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 800);
  EXPECT_EQ(cache.query_count(), 1);
}

TEST(DeviceInfoCache, OrdinalsPastTheTableAreQueriedEachTime) {
  g_fake_fails = false;
  detail::DeviceInfoCache cache(&fake_query);
  detail::DeviceInfo info;
  const int big = detail::DeviceInfoCache::kMaxDevices;
  EXPECT_TRUE(cache.get(big, &info).ok());
  EXPECT_TRUE(cache.get(big, &info).ok());
  EXPECT_EQ(info.index, big);
  EXPECT_EQ(cache.query_count(), 2);
}
