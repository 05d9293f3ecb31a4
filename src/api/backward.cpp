// Public backward entry points: validate, pick a backend for the current device, launch.
#include <string>

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/dispatch.h"
#include "api/validate.h"
#include "api/varlen_check.h"
#include "api/zero_fill.h"

namespace flashattn {

using detail::BwdParams;

Status validate(const BackwardArgs& args) {
  return detail::validate_and_convert(args, nullptr, nullptr);
}

namespace detail {

Status choose_backend(const BwdParams& p, Backend requested, int major, int minor,
                      Backend* chosen) {
  return choose_backend_for(p, requested, major, minor, chosen);
}

namespace {

bool has_elements(const TensorRef& t) {
  return t.shape[0] > 0 && t.shape[1] > 0 && t.shape[2] > 0 && t.shape[3] > 0;
}

// An empty call (some size 0) whose gradients still have elements: with Sq == 0 no query
// reaches dk/dv, with Sk == 0 no key reaches dq (out is 0 there), so they are 0. A call with
// nothing to write needs no device, as an empty forward. A varlen call zeroes only the rows
// inside its sequences.
Status zero_fill_gradients(const BackwardArgs& a, cudaStream_t stream) {
  const TensorRef* grads[] = {&a.dq, &a.dk, &a.dv};
  bool any = false;
  for (const TensorRef* g : grads) any = any || has_elements(*g);
  if (!any) return Status::Ok();
  Backend unused;
  // The reference request carries only the device rule (the fill kernel is built for 8.0+).
  Status s = pick_backend(BwdParams{}, Backend::kReference, &unused);
  const bool varlen = a.cu_seqlens_q != nullptr;
  for (const TensorRef* g : grads) {
    if (!s.ok() || !has_elements(*g)) continue;
    if (!varlen) {
      s = zero_fill_4d(g->data, g->shape, g->stride, stream);
      continue;
    }
    // Varlen: no sequence has a query (or none a key), so every gradient row inside a sequence
    // is 0; rows outside every sequence are not the call's to write.
    const bool q_side = g == &a.dq;
    s = zero_fill_varlen_rows(g->data, g->shape, g->stride, q_side ? a.cu_seqlens_q : a.cu_seqlens_k, a.num_seqs,
                              q_side ? a.max_seqlen_q : a.max_seqlen_k, stream);
  }
  return s;
}

// BackwardArgs::zero_outside_rows (validation admits it on varlen calls only): the gradient rows
// outside every sequence, which no kernel writes, get 0.
Status zero_outside_rows(const BackwardArgs& a, cudaStream_t stream) {
  if (!a.zero_outside_rows) return Status::Ok();
  const VarlenGradView views[] = {{a.dq.data, a.dq.shape, a.dq.stride, a.cu_seqlens_q, a.max_seqlen_q},
                                  {a.dk.data, a.dk.shape, a.dk.stride, a.cu_seqlens_k, a.max_seqlen_k},
                                  {a.dv.data, a.dv.shape, a.dv.stride, a.cu_seqlens_k, a.max_seqlen_k}};
  return zero_fill_varlen_outside(views, 3, a.num_seqs, stream);
}

}  // namespace

Status acquire_bwd_scratch(BwdScratch& ws, StreamScratch& scratch, cudaStream_t stream, const std::string& who,
                           bool zero_dq) {
  if (!scratch.allocate(ws.bytes(), stream))
    return {StatusCode::kCudaError, who + ": cannot allocate " + std::to_string(ws.bytes()) + " bytes of scratch"};
  ws.carve(scratch.get());
  // The turn counters follow the accumulator: one memset covers both.
  void* first = zero_dq ? static_cast<void*>(ws.dq_accum) : static_cast<void*>(ws.turns);
  const size_t bytes = zero_dq ? ws.zero_bytes() : ws.turn_bytes;
  if (bytes > 0 && cudaMemsetAsync(first, 0, bytes, stream) != cudaSuccess) return check_launch((who + ": memset").c_str());
  return Status::Ok();
}

}  // namespace detail

Status resolve_backend(const BackwardArgs& args, Backend* chosen) {
  BwdParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok()) return s;
  if (chosen == nullptr) return {StatusCode::kInvalidArgument, "chosen: null pointer"};
  // An empty call runs no family (at most the library's zero fill): report the reference
  // rather than asking the families about sizes of 0.
  return detail::pick_backend(p, empty ? Backend::kReference : args.backend, chosen);
}

Status backward(const BackwardArgs& args, cudaStream_t stream) {
  BwdParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok()) return s;
  if (empty) {
    s = detail::zero_fill_gradients(args, stream);
    return s.ok() ? detail::zero_outside_rows(args, stream) : s;
  }
  if (p.varlen()) {
    s = detail::debug_check_varlen(args.cu_seqlens_q, args.cu_seqlens_k, args.num_seqs, args.max_seqlen_q,
                                   args.max_seqlen_k, args.q.shape[1], args.k.shape[1], stream);
    if (!s.ok()) return s;
  }
  Backend chosen = Backend::kReference;
  s = detail::pick_backend(p, args.backend, &chosen);
  if (!s.ok()) return s;
  // choose_backend has checked the device and the family's supports(): the families trust it.
  switch (chosen) {
    case Backend::kSm90: s = detail::sm90_backward(p, stream); break;
    case Backend::kSm80: s = detail::sm80_backward(p, stream); break;
    default: s = detail::reference_backward(p, stream); break;
  }
  return s.ok() ? detail::zero_outside_rows(args, stream) : s;
}

}  // namespace flashattn
