#include "common/scratch.h"

#include <cstdint>
#include <mutex>
#include <vector>

namespace flashattn::detail {
namespace {

// The library's pool on `dev` (null when the device has no stream-ordered allocator). Its
// release threshold is unlimited so freed scratch stays mapped for the next call; the default
// pool is left alone (its settings are the application's).
cudaMemPool_t library_pool(int dev) {
  static std::mutex mu;
  static std::vector<std::pair<int, cudaMemPool_t>> pools;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& e : pools)
    if (e.first == dev) return e.second;
  int supported = 0;
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess && supported) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    if (cudaMemPoolCreate(&pool, &props) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    } else {
      pool = nullptr;
    }
  }
  cudaGetLastError();
  pools.emplace_back(dev, pool);
  return pool;
}

}  // namespace

bool StreamScratch::allocate(size_t bytes, cudaStream_t stream) {
  if (ptr_ != nullptr) return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  void* p = nullptr;
  cudaError_t e = cudaErrorMemoryAllocation;
  // Captured: a graph allocation node (graphs own their memory; an explicit pool adds nothing).
  if (cap == cudaStreamCaptureStatusNone) {
    if (cudaMemPool_t pool = library_pool(dev)) e = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
  }
  if (e != cudaSuccess) e = cudaMallocAsync(&p, bytes, stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  ptr_ = p;
  stream_ = stream;
  return true;
}

StreamScratch::~StreamScratch() {
  if (ptr_ != nullptr) {
    cudaFreeAsync(ptr_, stream_);
    cudaGetLastError();
  }
}

}  // namespace flashattn::detail
