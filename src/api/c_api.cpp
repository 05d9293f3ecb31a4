// C ABI: converts flat structs to the C++ API and keeps the last error per thread.
#include <string>

#include "flashattn/flashattn.h"
#include "flashattn/flashattn_c.h"

namespace {

thread_local std::string g_last_error;

int fail(const flashattn::Status& s) {
  g_last_error = s.message();
  return static_cast<int>(s.code());
}

int null_arg(const char* name) {
  g_last_error = std::string(name) + ": null tensor descriptor";
  return FLASHATTN_INVALID_ARGUMENT;
}

flashattn::TensorRef to_ref(const flashattn_tensor_t& t) {
  flashattn::TensorRef r;
  r.data = t.data;
  r.dtype = static_cast<flashattn::DType>(t.dtype);
  for (int i = 0; i < 4; ++i) {
    r.shape[i] = t.shape[i];
    r.stride[i] = t.stride[i];
  }
  return r;
}

int build_args(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
               const flashattn_tensor_t* v, const flashattn_tensor_t* out, float* lse,
               float softmax_scale, int causal, int backend, flashattn::ForwardArgs* a) {
  if (!q) return null_arg("q");
  if (!k) return null_arg("k");
  if (!v) return null_arg("v");
  if (!out) return null_arg("out");
  for (const flashattn_tensor_t* t : {q, k, v, out}) {
    if (t->dtype < FLASHATTN_FP16 || t->dtype > FLASHATTN_FP32) {
      g_last_error = "dtype: unknown value " + std::to_string(t->dtype);
      return FLASHATTN_INVALID_ARGUMENT;
    }
  }
  a->q = to_ref(*q);
  a->k = to_ref(*k);
  a->v = to_ref(*v);
  a->out = to_ref(*out);
  a->lse = lse;
  a->softmax_scale = softmax_scale;
  a->causal = causal != 0;
  a->backend = static_cast<flashattn::Backend>(backend);
  return FLASHATTN_OK;
}

}  // namespace

extern "C" int flashattn_forward(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                                 const flashattn_tensor_t* v, const flashattn_tensor_t* out,
                                 float* lse, float softmax_scale, int causal, int backend,
                                 void* stream) {
  flashattn::ForwardArgs a;
  if (int rc = build_args(q, k, v, out, lse, softmax_scale, causal, backend, &a)) return rc;
  flashattn::Status s = flashattn::forward(a, static_cast<cudaStream_t>(stream));
  return s.ok() ? FLASHATTN_OK : fail(s);
}

extern "C" int flashattn_resolve_backend(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                                         const flashattn_tensor_t* v,
                                         const flashattn_tensor_t* out, float* lse,
                                         float softmax_scale, int causal, int backend,
                                         int* chosen) {
  flashattn::ForwardArgs a;
  if (int rc = build_args(q, k, v, out, lse, softmax_scale, causal, backend, &a)) return rc;
  if (chosen == nullptr) return null_arg("chosen");
  flashattn::Backend b = flashattn::Backend::kReference;
  flashattn::Status s = flashattn::resolve_backend(a, &b);
  if (!s.ok()) return fail(s);
  *chosen = static_cast<int>(b);
  return FLASHATTN_OK;
}

extern "C" const char* flashattn_last_error(void) { return g_last_error.c_str(); }
extern "C" const char* flashattn_version(void) { return flashattn::version(); }
