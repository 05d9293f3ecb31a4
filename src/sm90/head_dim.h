// Which instantiated sm90 head dim serves a call (common/head_dim.h). Plain C++ (CPU-testable).
#pragma once

#include "common/head_dim.h"

namespace flashattn::sm90 {

// Forward kernels; 96 is the 128 layout with QK^T over 96 columns.
inline constexpr int kFwdHeadDims[] = {64, 96, 128, 192, 256};
// Backward kernels.
inline constexpr int kBwdHeadDims[] = {64, 128, 256};

constexpr int fwd_kernel_head_dim(int d, int dv) { return covering_head_dim(kFwdHeadDims, d, dv); }
constexpr int bwd_kernel_head_dim(int d, int dv) { return covering_head_dim(kBwdHeadDims, d, dv); }

}  // namespace flashattn::sm90
