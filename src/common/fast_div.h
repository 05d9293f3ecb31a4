// Division by a run-time constant without a divide instruction sequence.
// tests/cpu/test_sm90_stream_k.cpp checks it against '/' over the whole useful range.
#pragma once

#include "common/params.h"  // FLASHATTN_HOST_DEVICE

namespace flashattn {

// x / d for 0 <= x < 2^31 as a multiply-high and a shift (magic number m = ceil(2^p / d),
// p = 31 + ceil(log2 d)), with m and p computed once on the host. The sm90 producer thread runs
// with 24 registers, and the generic division sequence (a dozen instructions, several
// temporaries) made it spill.
struct FastDiv {
  unsigned d = 1, mul = 0, shift = 0;
  FastDiv() = default;
  FLASHATTN_HOST_DEVICE explicit FastDiv(int divisor) : d(static_cast<unsigned>(divisor)) {
    if (d > 1) {
      unsigned l = 0;
      while ((1ull << l) < d) ++l;  // ceil(log2 d)
      const unsigned long long p = 31 + l;
      mul = static_cast<unsigned>(((1ull << p) + d - 1) / d);
      shift = static_cast<unsigned>(p - 32);
    }
  }
  FLASHATTN_HOST_DEVICE int operator()(int x) const {
    const unsigned ux = static_cast<unsigned>(x);
#ifdef __CUDA_ARCH__
    return static_cast<int>(d > 1 ? __umulhi(ux, mul) >> shift : ux);
#else
    return static_cast<int>(d > 1 ? static_cast<unsigned>((static_cast<unsigned long long>(ux) * mul) >> 32) >> shift
                                  : ux);
#endif
  }
};

}  // namespace flashattn
