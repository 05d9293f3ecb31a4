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

// The end of the sequence whose rows (clamped as varlen_rows) hold `row`, or -1 if none does: the
// last sequence starting at or before it, by bisection over the (nondecreasing) offsets.
__device__ int64_t covering_end(const int* cu, int num_seqs, int max_len, int64_t total, int64_t row) {
  int lo = 0, hi = num_seqs;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (min(max(static_cast<int64_t>(cu[mid]), int64_t{0}), total) <= row) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return -1;
  int64_t start = 0, len = 0;
  varlen_rows(cu, lo - 1, max_len, total, &start, &len);
  return row < start + len ? start + len : -1;
}

// Varlen: only elements of rows inside a sequence (an edge-case fill, as above).
__global__ void zero_fill_varlen_kernel(uint16_t* data, Shape4 v, int64_t total, const int* cu, int num_seqs,
                                        int max_len) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t per_row = v.n[2] * v.n[3];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t row = i / per_row, h = (i / v.n[3]) % v.n[2], d = i % v.n[3];
    if (covering_end(cu, num_seqs, max_len, v.n[1], row) >= 0) data[row * v.s[1] + h * v.s[2] + d] = 0;
  }
}

// zero_fill_varlen_outside's gradients, one launch for all of them.
struct OutsideRows {
  static constexpr int kMax = 3;
  uint16_t* data[kMax];
  Shape4 v[kMax];
  const int* cu[kMax];
  int max_len[kMax];
  int num_seqs;
};

// Varlen: every element of the rows outside every sequence (rows before the first offset, after
// the last, and past a sequence's clamped length). Grid (chunks of kChunkRows rows, views): a
// chunk inside one sequence (the common case: the sequences cover the rows) costs one bisection
// and writes nothing; any other chunk finds each row's sequence, one warp per row, and zeroes
// the rows outside.
constexpr int kChunkRows = 256;
__global__ void zero_fill_varlen_outside_kernel(OutsideRows a) {
  const int t = blockIdx.y;
  if (a.data[t] == nullptr) return;
  const Shape4& v = a.v[t];
  const int64_t total = v.n[1];
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kChunkRows;
  if (r0 >= total) return;
  const int64_t r1 = min(r0 + kChunkRows, total);
  if (covering_end(a.cu[t], a.num_seqs, a.max_len[t], total, r0) >= r1) return;
  const int lane = threadIdx.x % 32;
  const int64_t per_row = v.n[2] * v.n[3];
  for (int64_t row = r0 + threadIdx.x / 32; row < r1; row += blockDim.x / 32) {
    if (covering_end(a.cu[t], a.num_seqs, a.max_len[t], total, row) >= 0) continue;
    for (int64_t e = lane; e < per_row; e += 32) a.data[t][row * v.s[1] + (e / v.n[3]) * v.s[2] + e % v.n[3]] = 0;
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

Status zero_fill_varlen_outside(const VarlenGradView* views, int count, int num_seqs, cudaStream_t stream) {
  if (count > OutsideRows::kMax) return {StatusCode::kInternal, "zero_fill_varlen_outside: too many views"};
  OutsideRows a{};
  a.num_seqs = num_seqs < 0 ? 0 : num_seqs;
  int64_t rows = 0;
  for (int t = 0; t < count; ++t) {
    const VarlenGradView& g = views[t];
    bool any = true;
    for (int k = 0; k < 4; ++k) {
      a.v[t].n[k] = g.shape[k];
      a.v[t].s[k] = g.stride[k];
      any = any && g.shape[k] > 0;
    }
    if (!any) continue;
    a.data[t] = static_cast<uint16_t*>(g.data);
    a.cu[t] = g.cu;
    a.max_len[t] = g.max_len < 0 ? 0 : g.max_len;
    rows = std::max(rows, g.shape[1]);
  }
  if (rows == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>((rows + kChunkRows - 1) / kChunkRows), static_cast<unsigned>(count));
  zero_fill_varlen_outside_kernel<<<grid, 256, 0, stream>>>(a);
  return check_launch("zero_fill_varlen_outside");
}

}  // namespace flashattn::detail
