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

// The rows [start, start + len) of sequence `seq` of a packed view of `total` rows, clamped as
// the kernels clamp them (to the max length and the packed rows), so bad offsets cannot move a
// write outside the view.
__device__ void varlen_rows(const int* cu, int seq, int max_len, int64_t total, int64_t* start, int64_t* len) {
  const int64_t s0 = min(max(static_cast<int64_t>(cu[seq]), int64_t{0}), total);
  *start = s0;
  *len = max(int64_t{0}, min(min(static_cast<int64_t>(cu[seq + 1]) - s0, static_cast<int64_t>(max_len)), total - s0));
}

// Varlen: only elements of rows inside a sequence. The row's sequence is found by bisection over
// the (nondecreasing) offsets; as above, an edge-case fill.
__global__ void zero_fill_varlen_kernel(uint16_t* data, Shape4 v, int64_t total, const int* cu, int num_seqs,
                                        int max_len) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t per_row = v.n[2] * v.n[3];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t row = i / per_row, h = (i / v.n[3]) % v.n[2], d = i % v.n[3];
    int lo = 0, hi = num_seqs;  // the last sequence starting at or before row: lo - 1
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (min(max(static_cast<int64_t>(cu[mid]), int64_t{0}), v.n[1]) <= row) lo = mid + 1;
      else hi = mid;
    }
    if (lo == 0) continue;
    int64_t start = 0, len = 0;
    varlen_rows(cu, lo - 1, max_len, v.n[1], &start, &len);
    if (row < start + len) data[row * v.s[1] + h * v.s[2] + d] = 0;
  }
}

// Varlen: every element of the rows outside every sequence (rows before the first offset, after
// the last, and past a sequence's clamped length). One warp per row: the row's sequence is found
// once (bisection, as above), and only outside rows are written, so the pass costs little more
// than the offsets' reads when the sequences cover the view.
__global__ void zero_fill_varlen_outside_kernel(uint16_t* data, Shape4 v, const int* cu, int num_seqs, int max_len) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int64_t per_row = v.n[2] * v.n[3];
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < v.n[1]; row += warps) {
    int lo = 0, hi = num_seqs;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (min(max(static_cast<int64_t>(cu[mid]), int64_t{0}), v.n[1]) <= row) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) {
      int64_t start = 0, len = 0;
      varlen_rows(cu, lo - 1, max_len, v.n[1], &start, &len);
      if (row < start + len) continue;
    }
    for (int64_t e = lane; e < per_row; e += 32) data[row * v.s[1] + (e / v.n[3]) * v.s[2] + e % v.n[3]] = 0;
  }
}

}  // namespace

Status zero_fill_varlen_rows(void* data, const int64_t shape[4], const int64_t stride[4], const int32_t* cu,
                             int num_seqs, int max_len, cudaStream_t stream) {
  Shape4 v;
  int64_t total = 1;
  for (int k = 0; k < 4; ++k) {
    v.n[k] = shape[k];
    v.s[k] = stride[k];
    total *= shape[k];
  }
  if (total == 0 || num_seqs <= 0 || max_len <= 0) return Status::Ok();
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 4096);
  zero_fill_varlen_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<uint16_t*>(data), v,
                                                                                 total, cu, num_seqs, max_len);
  return check_launch("zero_fill_varlen_rows");
}

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

Status zero_fill_varlen_outside(void* data, const int64_t shape[4], const int64_t stride[4], const int32_t* cu,
                                int num_seqs, int max_len, cudaStream_t stream) {
  Shape4 v;
  for (int k = 0; k < 4; ++k) {
    v.n[k] = shape[k];
    v.s[k] = stride[k];
  }
  if (v.n[0] == 0 || v.n[1] == 0 || v.n[2] == 0 || v.n[3] == 0) return Status::Ok();
  constexpr int kThreads = 256, kRowsPerBlock = kThreads / 32;
  const int64_t blocks = std::min<int64_t>((v.n[1] + kRowsPerBlock - 1) / kRowsPerBlock, 8192);
  zero_fill_varlen_outside_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<uint16_t*>(data), v, cu, num_seqs < 0 ? 0 : num_seqs, max_len < 0 ? 0 : max_len);
  return check_launch("zero_fill_varlen_outside");
}

}  // namespace flashattn::detail
