// Which instantiated head dim serves a call: the smallest one covering both q/k's (d) and
// v's (dv). Plain C++ (CPU-testable).
#pragma once

namespace flashattn::sm90 {

// Forward kernels: 64, 96 (the 128 layout, QK^T over 96 columns), 128, 192, 256. 0: none covers it.
constexpr int fwd_kernel_head_dim(int d, int dv) {
  const int m = d > dv ? d : dv;
  return m <= 0 ? 0 : m <= 64 ? 64 : m <= 96 ? 96 : m <= 128 ? 128 : m <= 192 ? 192 : m <= 256 ? 256 : 0;
}

// Backward kernels: 64, 128, 256. 0: none covers it.
constexpr int bwd_kernel_head_dim(int d, int dv) {
  const int m = d > dv ? d : dv;
  return m <= 0 ? 0 : m <= 64 ? 64 : m <= 128 ? 128 : m <= 256 ? 256 : 0;
}

}  // namespace flashattn::sm90
