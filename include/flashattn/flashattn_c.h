/* Flat C ABI over libflashattn, for ctypes and other languages.
 * Every call returns a flashattn_status_t; on failure flashattn_last_error()
 * returns the message of the last failed call on this thread. */
#ifndef FLASHATTN_C_H_
#define FLASHATTN_C_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  FLASHATTN_OK = 0,
  FLASHATTN_INVALID_ARGUMENT = 1,
  FLASHATTN_NOT_SUPPORTED = 2,
  FLASHATTN_NO_DEVICE = 3,
  FLASHATTN_CUDA_ERROR = 4,
  FLASHATTN_INTERNAL = 5
} flashattn_status_t;

typedef enum { FLASHATTN_FP16 = 0, FLASHATTN_BF16 = 1, FLASHATTN_FP32 = 2 } flashattn_dtype_t;

typedef enum {
  FLASHATTN_BACKEND_AUTO = 0,
  FLASHATTN_BACKEND_SM90 = 1,
  FLASHATTN_BACKEND_SM80 = 2,
  FLASHATTN_BACKEND_REFERENCE = 3
} flashattn_backend_t;

typedef struct {
  void* data;
  int32_t dtype; /* flashattn_dtype_t */
  int64_t shape[4];
  int64_t stride[4]; /* elements */
} flashattn_tensor_t;

/* ---------------------------------------------------------------------------------------------
 * Versioned parameter structs
 *
 * Entry points that will gain arguments over time take one struct whose FIRST field,
 * struct_size, is the size of the struct as the caller compiled it. A library built from a newer
 * header then knows which fields an older caller has, and an older library can tell whether a
 * newer caller asked for something it does not know.
 *
 * The rule the library applies to struct_size (flashattn_forward_ex and
 * flashattn_resolve_backend_ex; a failure is FLASHATTN_INVALID_ARGUMENT naming "params"):
 *   - params NULL: rejected.
 *   - struct_size smaller than the first version's size (FLASHATTN_FORWARD_PARAMS_SIZE_V1),
 *     or larger than FLASHATTN_PARAMS_MAX_SIZE (an uninitialized struct, most likely): rejected.
 *   - struct_size equal to the size of a version this library knows: accepted; the fields
 *     of later versions take their defaults.
 *   - struct_size larger than this library's sizeof: accepted only if every byte past the
 *     library's sizeof is zero (a newer caller that left the newer fields at their defaults);
 *     a non-zero byte there is a request this library cannot honour, and is rejected.
 *   - any other size (between two versions): rejected.
 * The library reads no byte at or past params + struct_size.
 *
 * How to extend a params struct (this header's maintainers):
 *   1. Append fields at the end, never reorder, resize, retype or remove one. A field may be
 *      deprecated (ignored) but keeps its place.
 *   2. A new field's default is all-zero bytes (NULL pointer, 0, 0.0f); pick the encoding so
 *      that zero means "feature off" (e.g. a window of -1 is stored as window + 1). This is what
 *      makes a newer caller's untouched fields mean the same to an older library.
 *   3. End each version on an 8-byte boundary with explicit fields, so no version has tail
 *      padding a later field could land in (padding bytes of an older caller are not known to
 *      be zero). Pad with a uint32_t reservedN that must be 0; a later version may give such a
 *      field a meaning whose default is 0.
 *   4. Add FLASHATTN_<NAME>_PARAMS_SIZE_V<n> (offset of the new version's end) below and
 *      teach the library the new size (src/api/c_api.cpp, known sizes list).
 *   5. Keep _init() setting struct_size to sizeof and every field to its default.
 * A backward pass (flashattn_backward_params_t, flashattn_backward_params_init,
 * flashattn_backward_ex, FLASHATTN_BACKWARD_PARAMS_SIZE_V1) follows the same pattern.
 * ------------------------------------------------------------------------------------------ */

/* Largest struct_size any entry point accepts. */
#define FLASHATTN_PARAMS_MAX_SIZE 4096

typedef struct {
  size_t struct_size; /* sizeof(flashattn_forward_params_t) as compiled by the caller */

  /* ---- version 1 ---- */
  flashattn_tensor_t q;   /* (B, Sq, Hq, D); D, Dv: multiples of 8, 8..256 */
  flashattn_tensor_t k;   /* (B, Sk, Hkv, D) */
  flashattn_tensor_t v;   /* (B, Sk, Hkv, Dv) */
  flashattn_tensor_t out; /* (B, Sq, Hq, Dv), q's dtype */
  float* lse;             /* optional (B, Hq, Sq) fp32 contiguous, natural log; NULL = none */
  float softmax_scale;    /* 0 = 1/sqrt(D) */
  int32_t causal;         /* non-zero: causal, bottom-right aligned when Sq != Sk */
  int32_t backend;        /* flashattn_backend_t; 0 = FLASHATTN_BACKEND_AUTO */
  uint32_t reserved0;     /* must be 0 (ends version 1 on an 8-byte boundary) */

  /* ---- version 2: packed variable-length batches (flash_attn_varlen_func) ----
   * Set cu_seqlens_q to make the call varlen: q/out are (1, total_q, Hq, D|Dv), k/v
   * (1, total_k, Hkv, D|Dv), lse (Hq, total_q); sequence i owns rows [cu[i], cu[i+1]) (device
   * int32 arrays of num_seqs + 1 nondecreasing offsets). Semantics and contract as
   * flashattn::ForwardArgs (flashattn.h). All zero: a dense call. */
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int32_t num_seqs;
  int32_t max_seqlen_q;
  int32_t max_seqlen_k;
  uint32_t reserved1; /* must be 0 (ends version 2 on an 8-byte boundary) */

  /* ---- version 3: sliding window, softcap, ALiBi (flashattn::ForwardArgs) ----
   * Zero is "off": the window sides are stored plus one (0 = unbounded, n + 1 = n keys). */
  int32_t window_left_plus1;
  int32_t window_right_plus1;
  float softcap;       /* 0 = off */
  uint32_t reserved2;  /* must be 0 */
  const float* alibi_slopes;  /* device fp32 (Hq,) or (B, Hq); NULL = off */
  int64_t alibi_batch_stride; /* 0: (Hq,) shared by the batch; else elements between batches */

  /* ---- later versions append here (see the rules above) ---- */
} flashattn_forward_params_t;

/* Size of version 1 of flashattn_forward_params_t (stays valid as the struct grows). */
#define FLASHATTN_FORWARD_PARAMS_SIZE_V1 \
  (offsetof(flashattn_forward_params_t, reserved0) + sizeof(uint32_t))
#define FLASHATTN_FORWARD_PARAMS_SIZE_V2 \
  (offsetof(flashattn_forward_params_t, reserved1) + sizeof(uint32_t))
#define FLASHATTN_FORWARD_PARAMS_SIZE_V3 \
  (offsetof(flashattn_forward_params_t, alibi_batch_stride) + sizeof(int64_t))

/* Zeroes *p, sets struct_size to this header's sizeof and every field to its default.
 * Inline on purpose: it writes the size the caller was compiled with, never more. Callers
 * that cannot use it (ctypes, other FFIs) zero the struct and set struct_size themselves. */
static inline void flashattn_forward_params_init(flashattn_forward_params_t* p) {
  memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
}

/* sizeof(flashattn_forward_params_t) as this library was built (for bindings to check their
 * mirror of the struct). */
size_t flashattn_forward_params_size(void);

/* Validates, dispatches and launches on stream (a cudaStream_t; NULL = legacy default stream).
 * Nothing is launched on a bad call; a call with any size 0 succeeds and launches nothing. */
int flashattn_forward_ex(const flashattn_forward_params_t* params, void* stream);

/* Backend that flashattn_forward_ex would pick; writes a flashattn_backend_t to *chosen. */
int flashattn_resolve_backend_ex(const flashattn_forward_params_t* params, int* chosen);

/* Positional forms of the two calls above (version 1's fields); they stay, as thin wrappers.
 * stream is a cudaStream_t (NULL = legacy default stream). */
int flashattn_forward(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                      const flashattn_tensor_t* v, const flashattn_tensor_t* out, float* lse,
                      float softmax_scale, int causal, int backend, void* stream);

int flashattn_resolve_backend(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                              const flashattn_tensor_t* v, const flashattn_tensor_t* out,
                              float* lse, float softmax_scale, int causal, int backend,
                              int* chosen);

/* ---------------------------------------------------------------------------------------------
 * Backward pass (same struct_size rules as flashattn_forward_params_t).
 * dq, dk, dv are overwritten; under GQA/MQA dk/dv are shaped like k/v (the library sums each
 * KV head's query heads). Scratch comes from a library workspace per (device, stream).
 * ------------------------------------------------------------------------------------------ */
typedef struct {
  size_t struct_size; /* sizeof(flashattn_backward_params_t) as compiled by the caller */

  /* ---- version 1 ---- */
  flashattn_tensor_t dout; /* (B, Sq, Hq, Dv), q's dtype */
  flashattn_tensor_t q;    /* (B, Sq, Hq, D) */
  flashattn_tensor_t k;    /* (B, Sk, Hkv, D) */
  flashattn_tensor_t v;    /* (B, Sk, Hkv, Dv) */
  flashattn_tensor_t out;  /* (B, Sq, Hq, Dv): the forward's output */
  const float* lse;        /* (B, Hq, Sq) fp32 contiguous: the forward's lse (natural log) */
  flashattn_tensor_t dq;   /* (B, Sq, Hq, D) */
  flashattn_tensor_t dk;   /* (B, Sk, Hkv, D) */
  flashattn_tensor_t dv;   /* (B, Sk, Hkv, Dv) */
  float softmax_scale;     /* 0 = 1/sqrt(D); must be the forward's */
  int32_t causal;          /* non-zero: causal; must be the forward's */
  int32_t deterministic;   /* non-zero: bitwise-reproducible dq, dk, dv */
  int32_t backend;         /* flashattn_backend_t; 0 = FLASHATTN_BACKEND_AUTO */

  /* ---- version 2: the forward's window, softcap and ALiBi (as flashattn_forward_params_t v3) */
  int32_t window_left_plus1;
  int32_t window_right_plus1;
  float softcap;
  uint32_t reserved0; /* must be 0 */
  const float* alibi_slopes;
  int64_t alibi_batch_stride;

  /* ---- version 3: packed variable-length batches (as flashattn_forward_params_t v2; must be
   * the forward's). Set cu_seqlens_q to make the call varlen: q/out/dout/dq are
   * (1, total_q, Hq, D|Dv), k/v/dk/dv (1, total_k, Hkv, D|Dv), lse (Hq, total_q). Only gradient
   * rows inside a sequence are written, unless zero_outside_rows. All zero: a dense call. */
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int32_t num_seqs;
  int32_t max_seqlen_q;
  int32_t max_seqlen_k;
  /* Varlen only (was reserved1, which had to be 0): non-zero also writes 0 to the dq/dk/dv rows
   * outside every sequence (BackwardArgs::zero_outside_rows). Ends version 3 on an 8-byte
   * boundary. */
  int32_t zero_outside_rows;

  /* ---- later versions append here ---- */
} flashattn_backward_params_t;

#define FLASHATTN_BACKWARD_PARAMS_SIZE_V1 \
  (offsetof(flashattn_backward_params_t, backend) + sizeof(int32_t))
#define FLASHATTN_BACKWARD_PARAMS_SIZE_V2 \
  (offsetof(flashattn_backward_params_t, alibi_batch_stride) + sizeof(int64_t))
#define FLASHATTN_BACKWARD_PARAMS_SIZE_V3 \
  (offsetof(flashattn_backward_params_t, zero_outside_rows) + sizeof(int32_t))

static inline void flashattn_backward_params_init(flashattn_backward_params_t* p) {
  memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
}

size_t flashattn_backward_params_size(void);

/* Validates, dispatches and launches the backward on stream (cudaStream_t; NULL = legacy). */
int flashattn_backward_ex(const flashattn_backward_params_t* params, void* stream);

/* Backend that flashattn_backward_ex would pick. */
int flashattn_resolve_backward_backend_ex(const flashattn_backward_params_t* params, int* chosen);

/* ---------------------------------------------------------------------------------------------
 * KV-cache attention (flash_attn_with_kvcache; decode). Same struct_size rules as above.
 * k_new/v_new (data NULL: none) are appended in place at each sequence's cache_seqlens, then q
 * attends to the first cache_seqlens + S_new keys; semantics as flashattn::KvCacheArgs.
 * ------------------------------------------------------------------------------------------ */
typedef struct {
  size_t struct_size; /* sizeof(flashattn_kvcache_params_t) as compiled by the caller */
  /* ---- version 1 ---- */
  flashattn_tensor_t q;       /* (B, Sq, Hq, D) */
  flashattn_tensor_t k_cache; /* (B, S_cache, Hkv, D), or paged (num_pages, page_size, Hkv, D) */
  flashattn_tensor_t v_cache; /* as k_cache with Dv */
  flashattn_tensor_t k_new;   /* optional (B, S_new, Hkv, D); data NULL = none */
  flashattn_tensor_t v_new;   /* (B, S_new, Hkv, Dv) */
  flashattn_tensor_t out;     /* (B, Sq, Hq, Dv) */
  float* lse;                 /* optional (B, Hq, Sq) fp32 */
  const int32_t* cache_seqlens; /* device (B,) int32, or NULL: cache_seqlen for every sequence */
  const int32_t* block_table;   /* paged: device (B, max_pages) int32; NULL: contiguous cache */
  int64_t block_table_stride;   /* elements between block_table rows; 0 = max_pages */
  int32_t cache_seqlen;
  int32_t max_pages;
  float softmax_scale; /* 0 = 1/sqrt(D) */
  int32_t causal;
  int32_t num_splits;  /* 0 = heuristic */
  int32_t backend;     /* flashattn_backend_t (reference is not available here) */
  /* ---- version 2: window, softcap, ALiBi (as flashattn_forward_params_t v3; window plus one) */
  int32_t window_left_plus1;
  int32_t window_right_plus1;
  float softcap;
  uint32_t reserved0; /* must be 0 */
  const float* alibi_slopes;
  int64_t alibi_batch_stride;
  /* ---- later versions append here ---- */
} flashattn_kvcache_params_t;
#define FLASHATTN_KVCACHE_PARAMS_SIZE_V1 \
  (offsetof(flashattn_kvcache_params_t, backend) + sizeof(int32_t))
#define FLASHATTN_KVCACHE_PARAMS_SIZE_V2 \
  (offsetof(flashattn_kvcache_params_t, alibi_batch_stride) + sizeof(int64_t))
static inline void flashattn_kvcache_params_init(flashattn_kvcache_params_t* p) {
  memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
}
size_t flashattn_kvcache_params_size(void);
/* Validates, appends and launches on stream (cudaStream_t; NULL = legacy default stream). */
int flashattn_kvcache_ex(const flashattn_kvcache_params_t* params, void* stream);
const char* flashattn_last_error(void);
const char* flashattn_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHATTN_C_H_ */
