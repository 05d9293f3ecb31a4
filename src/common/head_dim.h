// The head dim a family's kernel serves a call with: the smallest instantiated one covering both
// q/k's (d) and v's (dv); the columns in between are zero-filled on load and never written.
// Plain C++ (CPU-testable), shared by the sm90 and sm80 dispatch.
#pragma once

namespace flashattn {

// The smallest of `dims` (ascending) >= max(d, dv); 0 when none is or a head dim is not positive.
template <int N>
constexpr int covering_head_dim(const int (&dims)[N], int d, int dv) {
  if (d <= 0 || dv <= 0) return 0;
  const int need = d > dv ? d : dv;
  for (int k : dims)
    if (k >= need) return k;
  return 0;
}

}  // namespace flashattn
