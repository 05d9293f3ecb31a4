// Public C++ API of libflashattn. Framework-free: plain pointers, shapes and strides.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace flashattn {

enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

// A 4-D view (batch, seqlen, heads, headdim) with strides in elements.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kFloat16;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
};

// Builds a contiguous (B, S, H, D) view.
TensorRef make_contiguous(void* data, DType dtype, int64_t b, int64_t s, int64_t h, int64_t d);

enum class Backend : int { kAuto = 0, kSm90 = 1, kSm80 = 2, kReference = 3 };

const char* backend_name(Backend b);

struct ForwardArgs {
  // D and Dv: any multiples of 8 from 8 to 256 (D = 192 with Dv = 128 for DeepSeek-style MLA).
  TensorRef q;    // (B, Sq, Hq, D)
  TensorRef k;    // (B, Sk, Hkv, D)
  TensorRef v;    // (B, Sk, Hkv, Dv)
  TensorRef out;  // (B, Sq, Hq, Dv), same dtype as q
  float* lse = nullptr;        // optional (B, Hq, Sq) fp32 contiguous, natural log
  float softmax_scale = 0.0f;  // 0 means 1/sqrt(D)
  bool causal = false;         // bottom-right aligned when Sq != Sk
  Backend backend = Backend::kAuto;

  // Packed variable-length batch (FlashAttention 2's flash_attn_varlen_func) when
  // cu_seqlens_q is set: q and out are (1, total_q, Hq, D|Dv), k and v (1, total_k, Hkv, D|Dv);
  // sequence i owns rows [cu_seqlens_q[i], cu_seqlens_q[i+1]) of q/out and
  // [cu_seqlens_k[i], cu_seqlens_k[i+1]) of k/v (device int32 arrays of num_seqs + 1
  // nondecreasing offsets; zero-length sequences allowed). Causal is bottom-right per sequence;
  // lse is (Hq, total_q). max_seqlen_q / max_seqlen_k bound every sequence's lengths.
  // The offsets stay on the device (no host sync): the caller guarantees them. The kernels
  // clamp lengths to the max lengths and to the packed rows, so offsets that break the
  // contract give wrong rows, never a read or write outside q, k, v, out or lse. Debugging:
  // FLASHATTN_CHECK_VARLEN=1 in the environment makes every varlen forward and backward copy
  // the offsets to the host and check this contract first (kInvalidArgument naming the offset;
  // one stream synchronisation per call; skipped while the stream is captured into a graph). Out rows past
  // cu_seqlens_q[num_seqs] are not written. Rows of k and v past cu_seqlens_k[num_seqs] may hold
  // anything (NaN included); rows before cu_seqlens_k[0] (an offset past row 0) must be finite:
  // the sm90 forward loads a short sequence's key block ending on its last key, so it reads up
  // to one key block before the sequence, masked but multiplied by zero (0 * NaN is NaN).
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int num_seqs = 0;
  int max_seqlen_q = 0, max_seqlen_k = 0;

  // Sliding window, softcap and ALiBi (FlashAttention 2's semantics; all off by default):
  // window: query i sees key j iff i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right,
  // -1 leaving that side unbounded (with causal, right is 0). softcap > 0: each scaled score s
  // becomes softcap * tanh(s / softcap). alibi_slopes: device fp32 slopes, (Hq,) shared by the
  // batch (alibi_batch_stride 0) or (B, Hq) with that many elements between batches; the score
  // gains -slope * |i + Sk - Sq - j| after the scale and softcap.
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
};

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotSupported = 2,
  kNoDevice = 3,
  kCudaError = 4,
  kInternal = 5,
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Validates, dispatches and launches on `stream`. Nothing is launched on a bad call.
// A call with any size 0 succeeds and launches nothing.
Status forward(const ForwardArgs& args, cudaStream_t stream = nullptr);

// The backend `forward` would run for these arguments on the current device (after validation).
Status resolve_backend(const ForwardArgs& args, Backend* chosen);

// Validation only (no device queries); exposed for tests and bindings.
Status validate(const ForwardArgs& args);

// Gradients of the forward above. dq, dk, dv are written (overwritten, not accumulated).
// Under GQA/MQA dk/dv are shaped like k/v: the library sums each KV head's query heads.
struct BackwardArgs {
  TensorRef dout;  // (B, Sq, Hq, Dv), q's dtype; any strides the forward accepts for q
  TensorRef q;     // (B, Sq, Hq, D)
  TensorRef k;     // (B, Sk, Hkv, D)
  TensorRef v;     // (B, Sk, Hkv, Dv)
  TensorRef out;   // (B, Sq, Hq, Dv): the forward's output for these q, k, v
  const float* lse = nullptr;  // (B, Hq, Sq) fp32 contiguous: the forward's lse (natural log)
  TensorRef dq;    // (B, Sq, Hq, D), q's dtype
  TensorRef dk;    // (B, Sk, Hkv, D)
  TensorRef dv;    // (B, Sk, Hkv, Dv)
  float softmax_scale = 0.0f;  // 0 means 1/sqrt(D); must be the forward's
  bool causal = false;         // must be the forward's
  bool deterministic = false;  // bitwise-identical dq, dk, dv across runs and streams
  Backend backend = Backend::kAuto;
  // The forward's window, softcap and ALiBi (ForwardArgs); must be the forward's.
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;

  // Packed variable-length batch, as ForwardArgs (must be the forward's): when cu_seqlens_q is
  // set, q/out/dout/dq are (1, total_q, Hq, D|Dv), k/v/dk/dv (1, total_k, Hkv, D|Dv), lse
  // (Hq, total_q) as the varlen forward returns it. Only gradient rows inside a sequence are
  // written (dq/dk/dv rows outside every sequence keep their contents) unless zero_outside_rows;
  // rows of the inputs outside every sequence are never read into a result (they may hold
  // anything, NaN included).
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int num_seqs = 0;
  int max_seqlen_q = 0, max_seqlen_k = 0;
  // Varlen only: also write 0 to the dq/dk/dv rows outside every sequence (their gradient: no
  // output depends on them), so the caller need not clear the gradients before the call. A
  // pass over the rows that writes only the outside ones, far cheaper than clearing all.
  bool zero_outside_rows = false;
};

// Validates, dispatches and launches on `stream`. Scratch comes from a library workspace per
// (device, stream) (safe under CUDA-graph capture). When Sq or Sk is 0 the gradients that have
// elements are zero-filled (no query sees a key, so nothing flows); nothing else is launched.
// (Varlen: when no sequence has a query, or none a key, the rows inside sequences are zeroed.)
Status backward(const BackwardArgs& args, cudaStream_t stream = nullptr);

// The backend `backward` would run for these arguments on the current device.
Status resolve_backend(const BackwardArgs& args, Backend* chosen);

// Validation only (no device queries).
Status validate(const BackwardArgs& args);

// KV-cache attention (FlashAttention 2's flash_attn_with_kvcache; decode and chunked prefill).
// First k_new / v_new (if given) are written into the cache in place at keys
// [cache_seqlens[b], cache_seqlens[b] + S_new) of each sequence; then q attends to the first
// L_b = cache_seqlens[b] + S_new keys (causal: bottom-right against L_b). Cache slots at or past
// L_b may hold anything (NaN included): they are never read, and nothing but the new keys and
// values, out and lse is written. GQA query heads share their KV head's loads.
struct KvCacheArgs {
  TensorRef q;        // (B, Sq, Hq, D)
  // Contiguous: (B, S_cache, Hkv, D) and (B, S_cache, Hkv, Dv). Paged (block_table set):
  // (num_pages, page_size, Hkv, D|Dv), page_size a multiple of 16; key j of sequence b is row
  // j % page_size of page block_table[b * block_table_stride + j / page_size].
  TensorRef k_cache;
  TensorRef v_cache;
  TensorRef k_new;    // optional (data null: none): (B, S_new, Hkv, D)
  TensorRef v_new;    // (B, S_new, Hkv, Dv), with k_new
  TensorRef out;      // (B, Sq, Hq, Dv), q's dtype
  float* lse = nullptr;  // optional (B, Hq, Sq) fp32 contiguous, natural log
  // Keys already in each sequence's cache: device int32 (B,), or null for cache_seqlen for all.
  // The device values are the caller's contract (0 <= cache_seqlens[b], cache_seqlens[b] +
  // S_new <= the cache's capacity); the kernels clamp them, so a bad value gives wrong rows,
  // never an access outside the tensors.
  const int32_t* cache_seqlens = nullptr;
  int cache_seqlen = 0;
  const int32_t* block_table = nullptr;  // paged: device int32 (B, max_pages), row stride below
  int max_pages = 0;
  int64_t block_table_stride = 0;  // elements between block_table rows; 0 means max_pages
  float softmax_scale = 0.0f;      // 0 means 1/sqrt(D)
  bool causal = false;
  int num_splits = 0;              // key splits per (sequence, KV head); 0: heuristic
  Backend backend = Backend::kAuto;  // kAuto, kSm90 or kSm80 (one family-neutral kernel on cc >= 8.0)
  // Sliding window, softcap and ALiBi as in ForwardArgs, against each sequence's visible length
  // (query i of Sq sees key j iff L - Sq + i - window_left <= j <= L - Sq + i + window_right).
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
};

Status forward_kvcache(const KvCacheArgs& args, cudaStream_t stream = nullptr);
Status validate(const KvCacheArgs& args);

const char* version();

}  // namespace flashattn
