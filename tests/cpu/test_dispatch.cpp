// Backend choice for a given device capability (no GPU needed), the no-device path, and the
// per-device info cache dispatch reads the capability from.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <utility>
#include <thread>
#include <vector>

#include "api/backends.h"
#include "api/validate.h"
#include "common/device_info.h"

using namespace flashattn;
using detail::FwdParams;

namespace {

alignas(64) char g_buf[64];

// q, k: (.., d); v, out: (.., dv), dv < 0 meaning dv = d.
FwdParams params(int d = 128, int dv = -1) {
  if (dv < 0) dv = d;
  ForwardArgs a;
  a.q = make_contiguous(g_buf, DType::kBFloat16, 1, 128, 4, d);
  a.k = make_contiguous(g_buf, DType::kBFloat16, 1, 128, 4, d);
  a.v = a.out = make_contiguous(g_buf, DType::kBFloat16, 1, 128, 4, dv);
  FwdParams p;
  bool empty = true;
  const Status s = detail::validate_and_convert(a, &p, &empty);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(empty);
  return p;
}

// (D, Dv) pairs the API accepts: powers of two, other multiples of 8, and Dv != D. Which family
// serves which of them is the families' business (it changes as kernels land): the tests below
// only hold each family to its own supports() answer.
constexpr std::pair<int, int> kHeadDims[] = {{8, 8},     {24, 24},   {40, 24},   {64, 64},
                                             {64, 128},  {80, 80},   {96, 96},   {128, 128},
                                             {192, 128}, {192, 192}, {200, 200}, {256, 256}};

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
  // Every accepted (D, Dv) resolves; the family picked says it serves the call.
  for (auto [d, dv] : kHeadDims) {
    for (auto [maj, min] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{9, 0}}) {
      Backend b = Backend::kAuto;
      const FwdParams p = params(d, dv);
      const Status s = detail::choose_backend(p, Backend::kAuto, maj, min, &b);
      ASSERT_TRUE(s.ok()) << d << "/" << dv << ": " << s.message();
      if (b == Backend::kSm90) {
        EXPECT_EQ(maj, 9);
        EXPECT_TRUE(detail::sm90_supports(p).ok());
      } else if (b == Backend::kSm80) {
        EXPECT_TRUE(detail::sm80_supports(p).ok());
      } else {
        EXPECT_EQ(b, Backend::kReference) << d << "/" << dv;
        EXPECT_FALSE(detail::sm80_built() && detail::sm80_supports(p).ok()) << d << "/" << dv;
      }
    }
  }
}

TEST(Dispatch, UnsupportedBackendNamesItself) {
  // Whatever a family lacks, its refusal names the family.
  for (auto [d, dv] : kHeadDims) {
    const Status s90 = detail::sm90_supports(params(d, dv));
    if (!s90.ok()) {
      EXPECT_NE(s90.message().find("sm90"), std::string::npos) << s90.message();
    }
    const Status s80 = detail::sm80_supports(params(d, dv));
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
  // supports() still decides (its forward() trusts that): on a device the family runs on, the
  // forced call succeeds exactly when supports() does, and a refusal is supports()'s own
  // message, naming the family, with `chosen` untouched.
  struct Forced {
    Backend backend;
    int major, minor;
    const char* name;
  };
  for (auto [d, dv] : kHeadDims) {
    const FwdParams p = params(d, dv);
    for (const Forced f : {Forced{Backend::kSm90, 9, 0, "sm90"},
                           Forced{Backend::kSm80, 8, 0, "sm80"},
                           Forced{Backend::kSm80, 9, 0, "sm80"}}) {
      const Status family =
          f.backend == Backend::kSm90 ? detail::sm90_supports(p) : detail::sm80_supports(p);
      Backend b = Backend::kAuto;
      const Status s = detail::choose_backend(p, f.backend, f.major, f.minor, &b);
      EXPECT_EQ(s.code(), family.code()) << f.name << " " << d << "/" << dv;
      EXPECT_EQ(s.message(), family.message());
      if (s.ok()) {
        EXPECT_EQ(b, f.backend) << f.name << " " << d << "/" << dv;
      } else {
        EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.message();
        EXPECT_NE(s.message().find(f.name), std::string::npos) << s.message();
        EXPECT_EQ(b, Backend::kAuto);  // untouched on refusal
      }
    }
  }
}

// Window, softcap and ALiBi calls run on a family wherever one is built: sm80's feature kernels
// on 8.x, sm90's on Hopper; auto falls back to the reference only where neither is. The same
// calls packed (varlen) too: sm80's varlen feature kernels, sm90's varlen feature twins.
TEST(Dispatch, FeatureCallsRunOnAFamily) {
  struct Mods {
    int left, right;
    float softcap;
    bool alibi;
  };
  for (const Mods m : {Mods{16, 0, 0.f, false}, Mods{-1, -1, 30.f, false}, Mods{-1, -1, 0.f, true},
                       Mods{100, 3, 50.f, true}}) {
    for (auto [d, dv] : kHeadDims) {
      FwdParams p = params(d, dv);
      p.window_left = m.left;
      p.window_right = m.right;
      p.softcap = m.softcap;
      p.alibi_slopes = m.alibi ? reinterpret_cast<const float*>(g_buf) : nullptr;
      EXPECT_EQ(detail::sm80_supports(p).ok(), detail::sm80_built()) << detail::sm80_supports(p).message();
      for (auto [maj, min] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{9, 0}}) {
        Backend b = Backend::kReference;
        ASSERT_TRUE(detail::choose_backend(p, Backend::kAuto, maj, min, &b).ok());
        const bool hopper = maj == 9 && detail::sm90_built() && detail::sm90_supports(p).ok();
        const Backend want = hopper ? Backend::kSm90 : detail::sm80_built() ? Backend::kSm80 : Backend::kReference;
        EXPECT_EQ(b, want) << maj << "." << min << " d " << d << "/" << dv;
      }
      int cu[2] = {0, 128};  // never dereferenced here
      p.cu_q = p.cu_k = cu;
      p.total_q = p.total_k = 128;
      EXPECT_EQ(detail::sm80_supports(p).ok(), detail::sm80_built()) << "varlen: " << detail::sm80_supports(p).message();
      for (auto [maj, min] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{9, 0}}) {
        Backend b = Backend::kReference;
        ASSERT_TRUE(detail::choose_backend(p, Backend::kAuto, maj, min, &b).ok());
        const bool hopper = maj == 9 && detail::sm90_built() && detail::sm90_supports(p).ok();
        const Backend want = hopper ? Backend::kSm90 : detail::sm80_built() ? Backend::kSm80 : Backend::kReference;
        EXPECT_EQ(b, want) << "varlen " << maj << "." << min << " d " << d << "/" << dv;
      }
    }
  }
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

// ---- Backward dispatch (choose_backend(BwdParams)) ----

namespace {

// Made-up, disjoint, aligned addresses (validation reads no tensor memory).
char* bwd_region(int i) { return reinterpret_cast<char*>((uintptr_t{1} << 44) + (uintptr_t{1} << 40) * i); }

// q, k, dq, dk: (.., d); v, out, dout, dv: (.., dv), dv < 0 meaning dv = d.
detail::BwdParams bwd_params(int d = 128, bool deterministic = false, int dv = -1) {
  if (dv < 0) dv = d;
  BackwardArgs a;
  a.dout = make_contiguous(bwd_region(0), DType::kBFloat16, 1, 128, 4, dv);
  a.q = make_contiguous(bwd_region(1), DType::kBFloat16, 1, 128, 4, d);
  a.k = make_contiguous(bwd_region(2), DType::kBFloat16, 1, 128, 4, d);
  a.v = make_contiguous(bwd_region(3), DType::kBFloat16, 1, 128, 4, dv);
  a.out = make_contiguous(bwd_region(4), DType::kBFloat16, 1, 128, 4, dv);
  a.lse = reinterpret_cast<const float*>(bwd_region(5));
  a.dq = make_contiguous(bwd_region(6), DType::kBFloat16, 1, 128, 4, d);
  a.dk = make_contiguous(bwd_region(7), DType::kBFloat16, 1, 128, 4, d);
  a.dv = make_contiguous(bwd_region(8), DType::kBFloat16, 1, 128, 4, dv);
  a.deterministic = deterministic;
  detail::BwdParams p;
  bool empty = true;
  const Status s = detail::validate_and_convert(a, &p, &empty);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(empty);
  return p;
}

constexpr std::pair<int, int> kCapabilities[] = {{8, 0}, {8, 9}, {9, 0}};

}  // namespace

TEST(BwdDispatch, OldDeviceIsRejectedClearly) {
  for (Backend r : {Backend::kAuto, Backend::kReference, Backend::kSm90, Backend::kSm80}) {
    Backend b = Backend::kAuto;
    const Status s = detail::choose_backend(bwd_params(), r, 7, 5, &b);
    EXPECT_EQ(s.code(), StatusCode::kNoDevice) << backend_name(r);
    EXPECT_NE(s.message().find("8.0 or newer"), std::string::npos) << s.message();
  }
}

TEST(BwdDispatch, ReferenceAlwaysAvailable) {
  for (auto [maj, min] : kCapabilities) {
    Backend b = Backend::kAuto;
    EXPECT_TRUE(detail::choose_backend(bwd_params(), Backend::kReference, maj, min, &b).ok());
    EXPECT_EQ(b, Backend::kReference);
  }
}

TEST(BwdDispatch, Sm90NeedsHopperAndItsSupport) {
  for (auto [d, dv] : kHeadDims) {
    for (auto [maj, min] : kCapabilities) {
      const detail::BwdParams p = bwd_params(d, false, dv);
      Backend b = Backend::kAuto;
      const Status s = detail::choose_backend(p, Backend::kSm90, maj, min, &b);
      const Status family = detail::sm90_supports(p);
      if (maj == 9 && detail::sm90_built() && family.ok()) {
        EXPECT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(b, Backend::kSm90);
        continue;
      }
      EXPECT_EQ(s.code(), StatusCode::kNotSupported) << d << "/" << dv << " " << maj << "." << min;
      EXPECT_NE(s.message().find("sm90"), std::string::npos) << s.message();
      EXPECT_EQ(b, Backend::kAuto);  // untouched on refusal
      if (maj == 9 && detail::sm90_built()) {
        EXPECT_EQ(s.message(), family.message());
      }
    }
  }
}

// A packed (varlen) call of bwd_params' batch: its sequences as offsets, the tensors one batch.
void set_varlen(detail::BwdParams& p) {
  p.cu_q = reinterpret_cast<const int*>(bwd_region(10));
  p.cu_k = reinterpret_cast<const int*>(bwd_region(11));
  p.total_q = p.b * p.sq;
  p.total_k = p.b * p.sk;
}

// sm80's backward (src/sm80/bwd) serves every head dim pair up to 256, deterministic or not, on
// every 8.x and 9.0 device, with window, softcap, ALiBi and varlen (packed) batches as well.
TEST(BwdDispatch, Sm80ServesWhereBuilt) {
  for (auto [d, dv] : kHeadDims) {
    for (bool det : {false, true}) {
      for (auto [maj, min] : kCapabilities) {
        const detail::BwdParams p = bwd_params(d, det, dv);
        Backend b = Backend::kAuto;
        const Status s = detail::choose_backend(p, Backend::kSm80, maj, min, &b);
        if (detail::sm80_built()) {
          EXPECT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(b, Backend::kSm80);
        } else {
          EXPECT_EQ(s.code(), StatusCode::kNotSupported);
          EXPECT_NE(s.message().find("sm80"), std::string::npos) << s.message();
          EXPECT_EQ(b, Backend::kAuto);
        }
      }
    }
  }
  struct Feature {
    const char* name;
    void (*set)(detail::BwdParams&);
  };
  const Feature features[] = {
      {"window", [](detail::BwdParams& p) { p.window_left = 16; }},
      {"softcap", [](detail::BwdParams& p) { p.softcap = 30.f; }},
      {"ALiBi", [](detail::BwdParams& p) { p.alibi_slopes = reinterpret_cast<const float*>(bwd_region(9)); }},
      {"varlen", set_varlen},
      {"varlen + window + softcap",
       [](detail::BwdParams& p) {
         set_varlen(p);
         p.window_left = 16;
         p.softcap = 30.f;
       }},
  };
  for (const Feature& f : features) {
    detail::BwdParams p = bwd_params();
    f.set(p);
    // Calls with the feature run on the sm80 feature / varlen kernels where the family is built.
    const Status s = detail::sm80_supports(p);
    if (detail::sm80_built()) {
      EXPECT_TRUE(s.ok()) << f.name << ": " << s.message();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kNotSupported) << f.name;
    }
  }
}

TEST(BwdDispatch, AutoPicksSm90OnHopperThenSm80) {
  for (auto [d, dv] : kHeadDims) {
    for (bool det : {false, true}) {
      for (auto [maj, min] : kCapabilities) {
        const detail::BwdParams p = bwd_params(d, det, dv);
        Backend b = Backend::kReference;
        ASSERT_TRUE(detail::choose_backend(p, Backend::kAuto, maj, min, &b).ok());
        const bool sm90 = maj == 9 && detail::sm90_built() && detail::sm90_supports(p).ok();
        const Backend want = sm90 ? Backend::kSm90 : detail::sm80_built() ? Backend::kSm80 : Backend::kReference;
        EXPECT_EQ(b, want) << "d " << d << " dv " << dv << " deterministic " << det << " cc " << maj << "." << min;
      }
    }
  }
}

TEST(BwdDispatch, UnknownRequestIsInvalid) {
  Backend b = Backend::kAuto;
  const Status s = detail::choose_backend(bwd_params(), static_cast<Backend>(9), 9, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("backend"), std::string::npos) << s.message();
}

TEST(BwdDispatch, NoDeviceGivesOneClearError) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present";
  BackwardArgs a;
  a.dout = make_contiguous(bwd_region(0), DType::kFloat16, 1, 8, 1, 64);
  a.q = a.k = a.v = a.out = make_contiguous(bwd_region(1), DType::kFloat16, 1, 8, 1, 64);
  a.lse = reinterpret_cast<const float*>(bwd_region(5));
  a.dq = make_contiguous(bwd_region(6), DType::kFloat16, 1, 8, 1, 64);
  a.dk = make_contiguous(bwd_region(7), DType::kFloat16, 1, 8, 1, 64);
  a.dv = make_contiguous(bwd_region(8), DType::kFloat16, 1, 8, 1, 64);
  for (Backend r : {Backend::kAuto, Backend::kReference, Backend::kSm90}) {
    a.backend = r;
    const Status s = backward(a);
    EXPECT_EQ(s.code(), StatusCode::kNoDevice) << s.message();
    EXPECT_NE(s.message().find("compute capability 8.0"), std::string::npos) << s.message();
    Backend b;
    EXPECT_EQ(resolve_backend(a, &b).message(), s.message());
  }
}
