#include "api/zero_fill.h"

#include <algorithm>

#include "api/backends.h"

namespace flashattn::detail {
namespace {

struct Shape4 {
  int64_t n[4];
  int64_t s[4];
};

// One element per thread-step: a fill of an edge-case call, where simplicity beats bandwidth
// and no alignment beyond the element's may be assumed.
__global__ void zero_fill_4d_kernel(uint16_t* data, Shape4 v, int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t rest = i, off = 0;
    for (int k = 3; k >= 0; --k) {
      off += (rest % v.n[k]) * v.s[k];
      rest /= v.n[k];
    }
    data[off] = 0;
  }
}

}  // namespace

Status zero_fill_4d(void* data, const int64_t shape[4], const int64_t stride[4],
                    cudaStream_t stream) {
  Shape4 v;
  int64_t total = 1;
  for (int k = 0; k < 4; ++k) {
    v.n[k] = shape[k];
    v.s[k] = stride[k];
    total *= shape[k];
  }
  if (total == 0) return Status::Ok();
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 4096);
  zero_fill_4d_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<uint16_t*>(data), v, total);
  return check_launch("zero_fill_4d");
}

}  // namespace flashattn::detail
