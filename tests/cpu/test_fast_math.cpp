// arch::ex2_poly (src/arch/fast_math.h), the FMA-pipe exp2 the sm90 softcap kernels can take
// part of their softmax exp2 to: relative error against a double exp2, exact zeros where the
// online softmax needs them, exact powers of two at integers, no NaN and no decrease anywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "arch/fast_math.h"

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

}  // namespace
