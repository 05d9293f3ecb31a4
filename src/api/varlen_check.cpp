#include "api/varlen_check.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace flashattn::detail {

Status check_varlen_offsets(const int32_t* cu, int num_seqs, int max_len, int64_t total, const char* name,
                            const char* max_name) {
  auto bad = [&](const std::string& what) {
    return Status{StatusCode::kInvalidArgument, std::string(name) + ": " + what + " (FLASHATTN_CHECK_VARLEN)"};
  };
  if (num_seqs < 0) return bad("num_seqs is negative");
  if (cu[0] < 0) return bad("the first offset is negative (" + std::to_string(cu[0]) + ")");
  for (int i = 0; i < num_seqs; ++i) {
    const int64_t len = static_cast<int64_t>(cu[i + 1]) - cu[i];
    if (len < 0)
      return bad("offsets decrease at index " + std::to_string(i + 1) + " (" + std::to_string(cu[i + 1]) + " after " +
                 std::to_string(cu[i]) + ")");
    if (len > max_len)
      return bad("sequence " + std::to_string(i) + " is " + std::to_string(len) + " rows long, more than " + max_name +
                 " = " + std::to_string(max_len));
  }
  if (cu[num_seqs] > total)
    return bad("the last offset (" + std::to_string(cu[num_seqs]) + ") is past the packed tensor's " +
               std::to_string(total) + " rows");
  return Status::Ok();
}

bool varlen_check_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FLASHATTN_CHECK_VARLEN");
    return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
  }();
  return on;
}

Status debug_check_varlen(const int32_t* cu_q, const int32_t* cu_k, int num_seqs, int max_q, int max_k,
                          int64_t total_q, int64_t total_k, cudaStream_t stream) {
  if (!varlen_check_enabled() || num_seqs < 0) return Status::Ok();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for a later launch check to report
    return Status::Ok();
  }
  if (capture != cudaStreamCaptureStatusNone) return Status::Ok();
  std::vector<int32_t> q(static_cast<size_t>(num_seqs) + 1), k(q.size());
  const size_t bytes = q.size() * sizeof(int32_t);
  if (cudaMemcpyAsync(q.data(), cu_q, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaMemcpyAsync(k.data(), cu_k, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return {StatusCode::kCudaError, std::string("FLASHATTN_CHECK_VARLEN: copying the offsets: ") +
                                        cudaGetErrorString(cudaGetLastError())};
  Status s = check_varlen_offsets(q.data(), num_seqs, max_q, total_q, "cu_seqlens_q", "max_seqlen_q");
  if (s.ok()) s = check_varlen_offsets(k.data(), num_seqs, max_k, total_k, "cu_seqlens_k", "max_seqlen_k");
  return s;
}

}  // namespace flashattn::detail
