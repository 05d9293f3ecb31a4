/* Flat C ABI over libflashattn, for ctypes and other languages.
 * Every call returns a flashattn_status_t; on failure flashattn_last_error()
 * returns the message of the last failed call on this thread. */
#ifndef FLASHATTN_C_H_
#define FLASHATTN_C_H_

#include <stdint.h>

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

/* stream is a cudaStream_t (NULL = legacy default stream). */
int flashattn_forward(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                      const flashattn_tensor_t* v, const flashattn_tensor_t* out, float* lse,
                      float softmax_scale, int causal, int backend, void* stream);

/* Backend that flashattn_forward would pick; writes a flashattn_backend_t to *chosen. */
int flashattn_resolve_backend(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                              const flashattn_tensor_t* v, const flashattn_tensor_t* out,
                              float* lse, float softmax_scale, int causal, int backend,
                              int* chosen);

const char* flashattn_last_error(void);
const char* flashattn_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHATTN_C_H_ */
