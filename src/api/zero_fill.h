// Zeroes a strided 16-bit (B, S, H, D) view on a stream: the gradients of a backward call with
// Sq or Sk of 0 (no query sees a key, so nothing flows into them). Host-callable from .cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "flashattn/flashattn.h"

namespace flashattn::detail {

// Writes 0 to every element of the view and to nothing else (padding between rows, heads or
// batches is left alone). shape/stride in elements, as in TensorRef; a view with no elements
// launches nothing.
Status zero_fill_4d(void* data, const int64_t shape[4], const int64_t stride[4],
                    cudaStream_t stream);

// A varlen call's gradient: zeroes the rows of a packed (1, total, H, D) view that lie inside a
// sequence (rows [cu[i], cu[i+1]) of sequence i, clamped to max_len and to the view's rows, as the
// kernels clamp them; cu: device int32, num_seqs + 1 offsets) and nothing else.
Status zero_fill_varlen_rows(void* data, const int64_t shape[4], const int64_t stride[4], const int32_t* cu,
                             int num_seqs, int max_len, cudaStream_t stream);

// One packed (1, total, H, D) 16-bit gradient view of a varlen call and its side's offsets.
struct VarlenGradView {
  void* data = nullptr;
  const int64_t* shape = nullptr;
  const int64_t* stride = nullptr;
  const int32_t* cu = nullptr;
  int max_len = 0;
};

// A varlen call's gradients under BackwardArgs::zero_outside_rows (at most 3 views, one launch):
// zeroes the rows of each view that lie outside every sequence (the complement of
// zero_fill_varlen_rows' rows, with the same clamping) and nothing else. num_seqs 0: every row.
Status zero_fill_varlen_outside(const VarlenGradView* views, int count, int num_seqs, cudaStream_t stream);

}  // namespace flashattn::detail
