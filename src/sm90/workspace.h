// Host side: zeroed device buffers (can_allocate_now, alloc_zeroed), the tile-counter pool of the
// dynamic scheduler, the SM count persistent grids size to,
// and the stream-K tail's workspace (sm90/stream_k_merge.h), one buffer per (device,
// stream). Launches on one stream run in order, so they can share a buffer; the kernel leaves
// its counters at zero. A buffer is never freed while the process runs: a CUDA graph captured
// with it keeps the pointer, so growing allocates a new one and keeps the old.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <vector>

#include "common/device_info.h"

namespace flashattn::sm90 {

// Whether `stream` may take synchronous allocations: false while it is being captured into a
// graph (or when that cannot be told; the error is cleared).
inline bool can_allocate_now(cudaStream_t stream) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return false;
  }
  return true;
}

// A device buffer of `bytes`, zeroed and synchronised; null (error cleared) if it cannot be had.
inline void* alloc_zeroed(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    cudaGetLastError();
    cudaFree(p);
    return nullptr;
  }
  return p;
}

// A workspace of at least `bytes`, zeroed when allocated, for launches on `stream`; null when
// none can be had (too many streams, out of memory, or a graph capture that would need a new
// allocation): the caller then runs without the split.
inline void* stream_workspace(cudaStream_t stream, size_t bytes) {
  struct Entry {
    int dev;
    cudaStream_t stream;
    void* ptr;
    size_t bytes;
  };
  constexpr size_t kMaxEntries = 16;
  static std::mutex mu;
  static std::vector<Entry> entries;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu);
  Entry* e = nullptr;
  for (Entry& x : entries)
    if (x.dev == dev && x.stream == stream) e = &x;
  if (e != nullptr && e->bytes >= bytes) return e->ptr;
  if (e == nullptr && entries.size() >= kMaxEntries) return nullptr;
  if (!can_allocate_now(stream)) return nullptr;
  // Zero all of it (the counters must be; the slots need not, but a defined start helps sanitizers).
  void* p = alloc_zeroed(bytes);
  if (p == nullptr) return nullptr;
  if (e != nullptr) {
    e->ptr = p;  // the old buffer stays allocated (a captured graph may still use it)
    e->bytes = bytes;
  } else {
    entries.push_back({dev, stream, p, bytes});
  }
  return p;
}

// Tile counters for dynamic scheduling: a per-device pool of zeroed {next, finished} pairs,
// handed out round-robin so launches in flight on different streams use different pairs (each
// pair is zero again when its kernel ends). Null if the pool cannot be allocated (e.g. during
// stream capture in global mode); the kernel then strides statically.
inline int* next_tile_counter(cudaStream_t stream) {
  constexpr int kPairs = 256;
  static std::mutex mu;
  static int* pools[64] = {};
  static unsigned next[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (pools[dev] == nullptr) {
    // First use allocates and zeroes synchronously; not allowed while capturing a graph.
    if (!can_allocate_now(stream)) return nullptr;
    pools[dev] = static_cast<int*>(alloc_zeroed(kPairs * 2 * sizeof(int)));
    if (pools[dev] == nullptr) return nullptr;
  }
  return pools[dev] + 2 * (next[dev]++ % kPairs);
}

// SM count of the current device (persistent grids size to it), from the per-device cache.
inline int current_num_sms() {
  detail::DeviceInfo info;
  return detail::current_device_info(&info).ok() && info.sm_count > 0 ? info.sm_count : 1;
}

}  // namespace flashattn::sm90
