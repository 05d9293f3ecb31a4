// Device-side helpers shared by the GPU tests and flashattn-bench: random inputs, NaN
// poisoning, and the correctness rule (docs/ARCHITECTURE.md) evaluated against the GPU references.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_runtime_api.h>

#include "flashattn/flashattn.h"

namespace flashattn::check {

// Uniform in [mean - half_range, mean + half_range], from a counter hash (reproducible).
void fill_random(void* ptr, DType dt, int64_t n, uint64_t seed, float mean, float half_range,
                 cudaStream_t s);
// Fills 16-bit or fp32 storage with NaN so an unwritten output cannot pass a check.
void poison(void* ptr, DType dt, int64_t n, cudaStream_t s);

struct Report {
  bool pass = false;
  double out_err = 0, out_lowp_err = 0, out_bound = 0;
  // Fractions of out's elements that differ from the fp32 reference (rounded to the dtype):
  // finer than the max error, which the output's own rounding dominates.
  double out_differ = 0, out_lowp_differ = 0;
  double lse_err = 0, lse_lowp_err = 0, lse_bound = 0;
  bool lse_checked = false;
  std::string message;  // empty on success; the reason otherwise
};

// Compares args.out (B, Sq, Hq, Dv) (and args.lse) written by the call under test with the fp32
// GPU reference and the input-precision reference, under max|out-ref| <= 2 max|lowp-ref| + atol.
// Varlen calls too, when their sequences cover every packed row of q.
Report check_against_reference(const ForwardArgs& args, cudaStream_t s);

// Default absolute tolerance of the rule for a dtype.
double default_atol(DType dt);

// One 16-bit element of dtype dt (its bits, as copied from the device) as a double, on the host.
inline double half_bits_to_double(uint16_t h, DType dt) {
  if (dt == DType::kBFloat16) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(double(man), -24);
  else if (exp == 31) v = man ? std::nan("") : INFINITY;
  else v = std::ldexp(double(man | 0x400), exp - 25);
  return sign ? -v : v;
}

}  // namespace flashattn::check
