// Packed variable-length (varlen) batches in the sm80 forward: the rule that turns a sequence's
// cu_seqlens offsets into the rows its CTAs touch. Host-callable, so the GPU test file checks the
// rule without a device (tests/gpu/test_sm80_varlen.cpp, Sm80VarlenClamp).
#pragma once

#include <cstdint>

#include "common/params.h"  // FLASHATTN_HOST_DEVICE

namespace flashattn::sm80 {

// Rows [start, start + length) of sequence i under offsets cu (cu[i], cu[i + 1]), clamped so that
// no offset can move an access outside a tensor of `total` packed rows: start in [0, total],
// length in [0, max_len] and start + length <= total (a bad offset shortens or empties the
// sequence instead). 64-bit differences: any int32 offsets are safe.
FLASHATTN_HOST_DEVICE inline int varlen_rows(const int* cu, int i, int total, int max_len, int64_t& start) {
  const int64_t lo = cu[i], hi = cu[i + 1];
  const int64_t tot = total > 0 ? total : 0;
  start = lo < 0 ? 0 : (lo > tot ? tot : lo);
  int64_t len = hi - lo;
  if (len > max_len) len = max_len;
  if (len > tot - start) len = tot - start;
  return len > 0 ? static_cast<int>(len) : 0;
}

}  // namespace flashattn::sm80
