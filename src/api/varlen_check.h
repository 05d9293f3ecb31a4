// Debug-mode check of a varlen call's offsets. On the fast path the device offsets are the
// caller's contract (no host sync; the kernels clamp, so a broken contract gives wrong rows but
// no access outside the tensors). With FLASHATTN_CHECK_VARLEN set in the environment (to
// anything but "0"), forward() and backward() copy both offset arrays to the host and check the
// contract first, naming the offset that breaks it.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "flashattn/flashattn.h"

namespace flashattn::detail {

// One side's offsets on the host: num_seqs + 1 nondecreasing values, the first >= 0, the last
// <= total (the packed rows), every sequence at most max_len long. `name` is the argument the
// error names (cu_seqlens_q or cu_seqlens_k); `max_name` the bound's (max_seqlen_q / _k).
Status check_varlen_offsets(const int32_t* cu, int num_seqs, int max_len, int64_t total, const char* name,
                            const char* max_name);

// Whether FLASHATTN_CHECK_VARLEN asks for the check (read once per process).
bool varlen_check_enabled();

// The check on the device offsets of a varlen call, when enabled: both arrays copied to the host
// on `stream` (which synchronises it). While the stream is being captured into a CUDA graph no
// copy can run, so the check is skipped there (captured replays read the offsets then current).
Status debug_check_varlen(const int32_t* cu_q, const int32_t* cu_k, int num_seqs, int max_q, int max_k,
                          int64_t total_q, int64_t total_k, cudaStream_t stream);

}  // namespace flashattn::detail
