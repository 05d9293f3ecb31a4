#include "common/device_info.h"

#include <string>

#include <cuda_runtime_api.h>

namespace flashattn::detail {
namespace {

Status no_device(cudaError_t e) {
  std::string msg =
      "no CUDA device available (flashattn needs an NVIDIA GPU of compute capability 8.0 or newer)";
  if (e != cudaSuccess && e != cudaErrorNoDevice) msg += ": " + std::string(cudaGetErrorString(e));
  return {StatusCode::kNoDevice, std::move(msg)};
}

// The one CUDA query behind the process-wide cache. Clears the runtime's last error on failure
// so that a failed query does not surface later as some launch's error.
Status query_cuda_device(int index, DeviceInfo* out) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    return no_device(e);
  }
  DeviceInfo d;
  d.index = index;
  if ((e = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, index)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, index)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, index)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, index)) !=
          cudaSuccess) {
    cudaGetLastError();
    return {StatusCode::kCudaError,
            "device " + std::to_string(index) + " query: " + cudaGetErrorString(e)};
  }
  *out = d;
  return Status::Ok();
}

DeviceInfoCache& process_cache() {
  static DeviceInfoCache cache(&query_cuda_device);
  return cache;
}

}  // namespace

Status DeviceInfoCache::run_query(int index, DeviceInfo* out) {
  queries_.fetch_add(1, std::memory_order_relaxed);
  return query_(index, out);
}

Status DeviceInfoCache::get(int index, DeviceInfo* out) {
  if (index < 0 || index >= kMaxDevices) return run_query(index, out);
  if (ready_[index].load(std::memory_order_acquire)) {
    *out = info_[index];
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_[index].load(std::memory_order_relaxed)) {  // another thread may have filled it
    DeviceInfo d;
    Status s = run_query(index, &d);
    if (!s.ok()) return s;
    info_[index] = d;
    ready_[index].store(true, std::memory_order_release);
  }
  *out = info_[index];
  return Status::Ok();
}

Status current_device_info(DeviceInfo* out) {
  int dev = -1;
  const cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess || dev < 0) {
    cudaGetLastError();
    return no_device(e);
  }
  return process_cache().get(dev, out);
}

int device_info_query_count() { return process_cache().query_count(); }

}  // namespace flashattn::detail
