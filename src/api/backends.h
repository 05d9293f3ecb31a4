// The interface every kernel family implements. Families that are not built
// (FLASHATTN_ARCHS narrowed) are replaced by src/api/backend_stubs.cpp.
//
// Who checks what, once:
//   - validate_and_convert (api/validate.h): every argument rule. FwdParams it fills has
//     p.scale > 0 and finite (0 resolved to 1/sqrt(D)), supported head dim, 16-bit dtype,
//     aligned pointers, strides that are multiples of 8 elements. Families do not re-check these.
//   - choose_backend: the device's capability (>= 8.0; 9.0 for sm90) and the family's
//     <family>_supports(p), for an automatic and for a forced backend alike.
//   - <family>_supports(p): only what that family adds on top of validation (instantiated head
//     dims, strides the TMA cannot take, grid limits, driver features). It does not query the
//     device: the capability is dispatch's, passed to choose_backend.
//   - <family>_forward(p, stream): PRECONDITION: choose_backend picked this family for p on
//     the current device (forward() is the only library caller). It re-checks nothing and may
//     read the cached device info (common/device_info.h) for tuning. Dev harnesses that call it
//     directly must check <family>_supports(p) and the capability themselves.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "common/params.h"
#include "common/scratch.h"
#include "flashattn/flashattn.h"

namespace flashattn::detail {

// Hopper family: TMA + wgmma (src/sm90).
bool sm90_built();
// Ok if the sm90 family has a kernel for these params (on a 9.0 device); else kNotSupported
// naming what is missing.
Status sm90_supports(const FwdParams& p);
// Precondition: choose_backend chose kSm90 for p (see above).
Status sm90_forward(const FwdParams& p, cudaStream_t stream);

// Ampere family: mma.sync + ldmatrix + cp.async (src/sm80); runs on cc >= 8.0.
bool sm80_built();
Status sm80_supports(const FwdParams& p);
// Precondition: choose_backend chose kSm80 for p (see above).
Status sm80_forward(const FwdParams& p, cudaStream_t stream);

// Naive GPU reference (src/reference), any shape the API accepts.
Status reference_forward(const FwdParams& p, cudaStream_t stream);
// Same algorithm with scores and probabilities rounded to the input dtype (tests' yardstick).
Status reference_forward_lowp(const FwdParams& p, cudaStream_t stream);

// ---- Backward (same contract as the forward: validate_and_convert(BackwardArgs) checks every
// argument rule, choose_backend(BwdParams) the device and <family>_supports(BwdParams)). ----
// Ok if the sm90 family has a backward kernel for these params.
Status sm90_supports(const BwdParams& p);
// Precondition: choose_backend chose kSm90 for p. Takes scratch from the (device, stream)
// workspace.
Status sm90_backward(const BwdParams& p, cudaStream_t stream);
// Ok if the sm80 family has a backward kernel for these params (src/sm80/bwd/launcher.cu).
Status sm80_supports(const BwdParams& p);
// Precondition: choose_backend chose kSm80 for p. Takes scratch as sm90_backward does.
Status sm80_backward(const BwdParams& p, cudaStream_t stream);
// sm80_backward with the kernels of a device whose opt-in shared memory per block is
// smem_optin bytes (sm80/bwd/select.h's tier), whatever the current device has; sm80_backward
// passes the current device's. Tests force the small tier on a larger device with it.
Status sm80_backward_for_smem(const BwdParams& p, int smem_optin, cudaStream_t stream);
// Naive GPU backward (src/reference): fp32 accumulation, 64-bit offsets, any valid shape.
Status reference_backward(const BwdParams& p, cudaStream_t stream);
// Same with P and dS rounded to the input dtype (the tests' low-precision yardstick).
Status reference_backward_lowp(const BwdParams& p, cudaStream_t stream);
Status choose_backend(const BwdParams& p, Backend requested, int major, int minor,
                      Backend* chosen);

// Dispatch for a device of capability major.minor (pure: testable without a GPU). The only
// caller of the families' supports() on the forward path.
Status choose_backend(const FwdParams& p, Backend requested, int major, int minor,
                      Backend* chosen);

// Checks the launch that was just enqueued.
Status check_launch(const char* what);

// The backward launchers' common start: ws's scratch allocated on `stream` into `scratch`,
// carved, and its turn counters and (zero_dq) dQ accumulator zeroed; `who` ("backend sm90
// backward", ...) names the caller in the error. zero_dq false: the caller's preprocess zeroes
// the accumulator rows the main kernel adds into (the varlen ones: only blocks of a sequence).
Status acquire_bwd_scratch(BwdScratch& ws, StreamScratch& scratch, cudaStream_t stream, const std::string& who,
                           bool zero_dq = true);

}  // namespace flashattn::detail
