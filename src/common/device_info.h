// What dispatch and the launchers need to know about a CUDA device, queried once per device
// and cached for the life of the process. Host-only (no device code includes this).
//
// current_device_info() is the one place that asks the CUDA runtime for capability, SM count
// and the shared-memory opt-in limit; everything else reads its answer. After the first call
// for a device a lookup costs one cudaGetDevice and one atomic load (no lock).
#pragma once

#include <atomic>
#include <mutex>

#include "flashattn/flashattn.h"

namespace flashattn::detail {

struct DeviceInfo {
  int index = -1;      // CUDA device ordinal
  int major = 0;       // compute capability
  int minor = 0;
  int sm_count = 0;    // cudaDevAttrMultiProcessorCount
  int smem_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin, bytes
  int sm() const { return major * 10 + minor; }  // 90 for 9.0
};

// Info of the calling thread's current device (cudaGetDevice). The first call for a device
// queries it; later calls read the cache. Thread-safe. With no usable device (no GPU, no
// driver, driver too old) it returns kNoDevice with a message that says flashattn needs a GPU of
// compute capability 8.0 or newer, and the runtime's sticky error is cleared. A device older
// than 8.0 is still reported Ok here: dispatch (choose_backend) decides what it can run.
Status current_device_info(DeviceInfo* out);

// Number of device queries the process-wide cache has made so far (failed ones included).
// For tests and diagnostics: it grows by one per device per process in normal use.
int device_info_query_count();

// Per-device cache over a query function. The library keeps one, over the CUDA query, behind
// current_device_info(); tests build their own over a fake query to check the caching.
// Failed queries are not cached (the next call asks again).
class DeviceInfoCache {
 public:
  using Query = Status (*)(int index, DeviceInfo* out);
  static constexpr int kMaxDevices = 64;  // ordinals past this are queried on every call

  explicit DeviceInfoCache(Query query) : query_(query) {}
  DeviceInfoCache(const DeviceInfoCache&) = delete;
  DeviceInfoCache& operator=(const DeviceInfoCache&) = delete;

  Status get(int index, DeviceInfo* out);
  int query_count() const { return queries_.load(std::memory_order_relaxed); }

 private:
  Status run_query(int index, DeviceInfo* out);

  Query query_;
  std::mutex mu_;                          // serializes first queries
  std::atomic<bool> ready_[kMaxDevices]{};  // info_[i] is filled (release/acquire)
  DeviceInfo info_[kMaxDevices];
  std::atomic<int> queries_{0};
};

}  // namespace flashattn::detail
