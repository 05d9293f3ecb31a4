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

// The backward's scratch in one StreamScratch (both families, dense and varlen): two rows of
// fp32 row statistics (lse in log2 units, rowsum(dO * O)), the fp32 dQ accumulator and, in
// deterministic mode, the int turn counters, each 256-byte aligned. The accumulator and the
// counters are contiguous, so one memset of zero_bytes() from dq_accum clears both.
struct BwdScratch {
  size_t stat_bytes = 0, dq_bytes = 0, turn_bytes = 0;
  float* lse_log2 = nullptr;
  float* dsum = nullptr;
  float* dq_accum = nullptr;
  int* turns = nullptr;  // null without deterministic mode (turn_count 0)

  BwdScratch(size_t stat_rows, size_t dq_floats, size_t turn_count)
      : stat_bytes(align(stat_rows * 4)), dq_bytes(align(dq_floats * 4)), turn_bytes(align(turn_count * 4)) {}
  size_t bytes() const { return 2 * stat_bytes + dq_bytes + turn_bytes; }
  size_t zero_bytes() const { return dq_bytes + turn_bytes; }
  // Points the pieces into `base` (bytes() long).
  void carve(void* base) {
    char* ws = static_cast<char*>(base);
    lse_log2 = reinterpret_cast<float*>(ws);
    dsum = reinterpret_cast<float*>(ws + stat_bytes);
    dq_accum = reinterpret_cast<float*>(ws + 2 * stat_bytes);
    turns = turn_bytes > 0 ? reinterpret_cast<int*>(ws + 2 * stat_bytes + dq_bytes) : nullptr;
  }
  static size_t align(size_t x) { return (x + 255) & ~size_t{255}; }
};

}  // namespace flashattn::detail
