// Host launchers of the KV-cache path's kernels (each defined in its own translation unit).
#pragma once

#include <cuda_runtime_api.h>

#include "common/params.h"
#include "decode/kernel_args.h"
#include "flashattn/flashattn.h"

namespace flashattn::decode {

// append.cu: k_new / v_new into the cache (s_new > 0).
Status launch_append(const detail::KvCacheParams& p, cudaStream_t stream);

// combine.cu: out / lse from the splits' partial O and lse (args.splits > 1).
Status launch_combine(const DecodeArgs& args, cudaStream_t stream);

// launch.h, instantiated in instantiations/kvcache_d{64,128,256}.cu: the attention (split
// plan, scratch, kernel, combine) on the kernel of covering head dim kHeadDim.
template <int kHeadDim, bool kBf16>
Status run_kvcache_attention(const detail::KvCacheParams& p, cudaStream_t stream);

// The CUDA error of the last launch, if any, as a Status naming `what`.
inline Status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {StatusCode::kCudaError, std::string("kvcache: ") + what + ": " + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace flashattn::decode
