// Stream-ordered scratch for one launch sequence (the backward's fp32 dQ accumulator, row
// statistics and ordering counters). Allocated on the stream and freed on the stream after the
// last kernel that uses it, from a library-owned memory pool per device that keeps its memory
// between calls (so steady-state calls do not reach the driver's allocator). Under CUDA-graph
// capture the allocation and the free become graph memory nodes, which is what makes the same
// call capturable. Sizes in the hundreds of MB (dQ at long sequences) are returned to the pool,
// never held per stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace flashattn::detail {

class StreamScratch {
 public:
  StreamScratch() = default;
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  // Frees on the stream (stream order keeps it alive for the kernels enqueued before).
  ~StreamScratch();

  // Allocates `bytes` on `stream`; false (error cleared) when it cannot.
  bool allocate(size_t bytes, cudaStream_t stream);
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace flashattn::detail
