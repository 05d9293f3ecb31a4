// arch::ex2_poly (src/arch/fast_math.h), the FMA-pipe exp2 the sm90 softcap kernels can take
// part of their softmax exp2 to: relative error against a double exp2, exact zeros where the
// online softmax needs them, exact powers of two at integers, no NaN and no decrease anywhere.
// And AttnParams::softcap_bounds_max, the host's condition for the forward kernels' bounded-max
// softmax: only where its smallest probability stays a normal number.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "arch/fast_math.h"
#include "common/params.h"

namespace {

using flashattn::arch::ex2_poly;
using flashattn::arch::float_bits;

constexpr float kStep = 1.f / 4096.f;
constexpr double kMinNormal = 0x1p-126;

template <int kDegree>
double max_rel_error(float lo, float hi) {
  double worst = 0.0;
  for (long k = 0;; ++k) {
    const float x = lo + static_cast<float>(k) * kStep;
    if (x >= hi) break;
    worst = std::fmax(worst, std::fabs(static_cast<double>(ex2_poly<kDegree>(x)) / std::exp2(static_cast<double>(x)) - 1.0));
  }
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int k = 0; k < 1000000; ++k) {
    const float x = dist(rng);
    worst = std::fmax(worst, std::fabs(static_cast<double>(ex2_poly<kDegree>(x)) / std::exp2(static_cast<double>(x)) - 1.0));
  }
  return worst;
}

// Measured maxima: 1.014e-4 (degree 3) and 2.86e-6 (degree 4).
TEST(FastMath, Ex2PolyRelativeError) {
  EXPECT_LT(max_rel_error<3>(-126.f, 0.f), 1.02e-4);
  EXPECT_LT(max_rel_error<3>(0.f, 128.f), 1.02e-4);
  EXPECT_LT(max_rel_error<4>(-126.f, 0.f), 2.9e-6);
  EXPECT_LT(max_rel_error<4>(0.f, 128.f), 2.9e-6);
}

template <int kDegree>
void check_exact_points() {
  // -inf (a masked score), NaN and everything at or below -127: exactly +0.
  for (float x : {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::max(), -1e30f, -1000.f, -130.f, -127.5f, -127.f}) {
    EXPECT_EQ(float_bits(ex2_poly<kDegree>(x)), 0u) << "x = " << x;
  }
  for (float x = -130.f; x <= -127.f; x += kStep) EXPECT_EQ(float_bits(ex2_poly<kDegree>(x)), 0u) << "x = " << x;
  // (-127, -126): a subnormal below the smallest normal (ex2.approx.ftz flushes these to 0).
  for (float x = -127.f + kStep; x < -126.f; x += kStep) {
    const float r = ex2_poly<kDegree>(x);
    EXPECT_TRUE(r >= 0.f && r < kMinNormal) << "x = " << x << " -> " << r;
  }
  // Integers: f = 0 and p(0) = 1, so exactly 2^n.
  for (int n = -126; n <= 127; ++n) {
    EXPECT_EQ(ex2_poly<kDegree>(static_cast<float>(n)), std::ldexp(1.f, n)) << "n = " << n;
  }
}

TEST(FastMath, Ex2PolyExactPoints) {
  check_exact_points<3>();
  check_exact_points<4>();
}

template <int kDegree>
void check_monotone() {
  float prev = 0.f;
  long decreases = 0;
  for (long k = 0;; ++k) {
    const float x = -130.f + static_cast<float>(k) * kStep;
    if (x >= 128.f) break;
    const float r = ex2_poly<kDegree>(x);
    ASSERT_FALSE(std::isnan(r) || std::isinf(r)) << "x = " << x;
    if (r < prev) ++decreases;
    prev = r;
  }
  EXPECT_EQ(decreases, 0);
}

TEST(FastMath, Ex2PolyMonotone) {
  check_monotone<3>();
  check_monotone<4>();
}

// The bounded-max softmax takes softcap as every row's max, so a probability can be as small as
// exp2(-2 * softcap * log2 e): the condition must hold exactly where that is a normal float
// (and bf16, which shares fp32's exponent range) with margin above ex2.approx.ftz's flush.
TEST(SoftcapBoundedMax, OnlyWhereTheSmallestProbabilityIsNormal) {
  flashattn::detail::AttnParams p;
  p.dtype = flashattn::detail::ElemType::kBFloat16;
  p.scale = 0.125f;
  p.scale_log2 = p.scale * flashattn::detail::kLog2e;
  int on = 0;
  for (float cap = 0.25f; cap <= 64.f; cap += 0.25f) {
    p.softcap = cap;
    const double smallest = std::exp2(-2.0 * static_cast<double>(p.exp2_scale()));
    if (p.softcap_bounds_max()) {
      ++on;
      EXPECT_GE(smallest, 0x1p-120) << "softcap " << cap;
    } else {
      EXPECT_LT(smallest, 0x1p-119) << "softcap " << cap << " refused although P stays normal";
    }
  }
  EXPECT_GT(on, 100);  // most of the range qualifies (0.25 .. 41.5)
  p.softcap = 30.f;
  EXPECT_TRUE(p.softcap_bounds_max());
  p.dtype = flashattn::detail::ElemType::kFloat16;  // P in fp16 flushes below 2^-24
  EXPECT_FALSE(p.softcap_bounds_max());
  p.dtype = flashattn::detail::ElemType::kBFloat16;
  const float slope = 0.5f;
  p.alibi_slopes = &slope;  // ALiBi's bias moves the row's true max below the bound
  EXPECT_FALSE(p.softcap_bounds_max());
  p.alibi_slopes = nullptr;
  p.softcap = 0.f;
  EXPECT_FALSE(p.softcap_bounds_max());
}

}  // namespace
