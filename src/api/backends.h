// The interface every kernel family implements. Families that are not built
// (FLASHATTN_ARCHS narrowed) are replaced by src/api/backend_stubs.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "common/params.h"
#include "flashattn/flashattn.h"

namespace flashattn::detail {

// Hopper family: TMA + wgmma (src/sm90).
bool sm90_built();
// Ok if the sm90 family has a kernel for these params; else kNotSupported naming what is missing.
Status sm90_supports(const FwdParams& p);
Status sm90_forward(const FwdParams& p, cudaStream_t stream);

// Ampere family: mma.sync + ldmatrix + cp.async (src/sm80); runs on cc >= 8.0.
bool sm80_built();
Status sm80_supports(const FwdParams& p);
Status sm80_forward(const FwdParams& p, cudaStream_t stream);

// Naive GPU reference (src/reference), any shape the API accepts.
Status reference_forward(const FwdParams& p, cudaStream_t stream);
// Same algorithm with scores and probabilities rounded to the input dtype (tests' yardstick).
Status reference_forward_lowp(const FwdParams& p, cudaStream_t stream);

// Dispatch for a device of capability major.minor (pure: testable without a GPU).
Status choose_backend(const FwdParams& p, Backend requested, int major, int minor,
                      Backend* chosen);

// Checks the launch that was just enqueued.
Status check_launch(const char* what);

}  // namespace flashattn::detail
