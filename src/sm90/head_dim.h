// Which instantiated sm90 head dim serves a call (common/head_dim.h). Plain C++ (CPU-testable).
#pragma once

#include "common/head_dim.h"

namespace flashattn::sm90 {

// Forward kernels (96: 64B-swizzled tiles, config.h).
inline constexpr int kFwdHeadDims[] = {64, 96, 128, 192, 256};
// Backward kernels.
inline constexpr int kBwdHeadDims[] = {64, 128, 256};

constexpr int fwd_kernel_head_dim(int d, int dv) { return covering_head_dim(kFwdHeadDims, d, dv); }
constexpr int bwd_kernel_head_dim(int d, int dv) { return covering_head_dim(kBwdHeadDims, d, dv); }
// Dense forward calls the D=192 kernel would serve with v at most 128 columns wide run on the
// (192, 128) pair kernel instead (tile_table.h, pair_table_192_128).
constexpr bool fwd_uses_pair_192_128(int d, int dv) { return fwd_kernel_head_dim(d, dv) == 192 && dv <= 128; }

}  // namespace flashattn::sm90
