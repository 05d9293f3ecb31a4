// Host side of the stream-K tail (stream_k.h): whether to split a launch, and its workspace.
// Included by launch_template.h only.
#pragma once

#include <cuda_runtime.h>

#include <climits>

#include "common/env_switch.h"
#include "sm90/fwd/kernel_args.h"
#include "sm90/fwd/stream_k.h"
#include "sm90/fwd/stream_k_merge.h"
#include "sm90/workspace.h"

namespace flashattn::sm90 {

// Stream-K tail (stream_k.h) for a non-causal persistent launch: when the tiles leave the last
// wave partly empty, sets args' plan and workspace. Outside graph capture the workspace is the
// stream's own (workspace.h). Under capture it is a stream-ordered allocation with its counters
// zeroed, i.e. allocation and memset nodes in the graph; the caller frees the returned pointer
// after the launch (a free node). Leaves args unsplit when no workspace can be had.
template <class Cfg>
void* setup_stream_k(Sm90FwdArgs& args, long long tiles, int n_blocks, int sms, cudaStream_t stream) {
  using Ws = StreamKWorkspace<Cfg>;
  // FLASHATTN_SM90_STREAM_K=0 turns the split off (A/B runs, debugging).
  if (!env_switch_on("FLASHATTN_SM90_STREAM_K") || tiles + 2LL * sms > INT32_MAX) return nullptr;
  const StreamKPlan plan = StreamKPlan::make(tiles, sms, n_blocks);
  if (plan.chunks == 0 || plan.sk_tiles > 256) return nullptr;
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  char* ws = nullptr;
  void* to_free = nullptr;
  if (cap == cudaStreamCaptureStatusNone) {
    // Sized for the most chunks any launch can have, so the buffer is allocated once.
    ws = static_cast<char*>(stream_workspace(stream, Ws::bytes(sms)));
  } else if (cap == cudaStreamCaptureStatusActive) {
    void* p = nullptr;
    if (cudaMallocAsync(&p, Ws::bytes(plan.chunks), stream) == cudaSuccess) {
      if (cudaMemsetAsync(p, 0, Ws::kCounterBytes, stream) == cudaSuccess) {
        ws = static_cast<char*>(p);
        to_free = p;
      } else {
        cudaFreeAsync(p, stream);
      }
    }
    cudaGetLastError();
  }
  if (ws == nullptr) return nullptr;
  args.plan = plan;
  args.sk_counters = reinterpret_cast<int*>(ws);
  args.sk_partials = reinterpret_cast<float*>(ws + Ws::kCounterBytes);
  return to_free;
}

}  // namespace flashattn::sm90
