// C ABI: reads the versioned params structs (rules in flashattn_c.h), converts them to the C++ API
// and keeps the last error per thread. The positional entry points fill a params struct and
// take the same path.
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>

#include "flashattn/flashattn.h"
#include "flashattn/flashattn_c.h"

namespace {

// Every size a version of flashattn_forward_params_t has had, oldest first; the last is this
// header's sizeof. A new version appends its FLASHATTN_FORWARD_PARAMS_SIZE_V<n>.
constexpr size_t kForwardParamsSizes[] = {FLASHATTN_FORWARD_PARAMS_SIZE_V1, FLASHATTN_FORWARD_PARAMS_SIZE_V2,
                                           FLASHATTN_FORWARD_PARAMS_SIZE_V3};

static_assert(offsetof(flashattn_forward_params_t, struct_size) == 0, "struct_size must come first");
static_assert(kForwardParamsSizes[std::size(kForwardParamsSizes) - 1] == sizeof(flashattn_forward_params_t),
              "flashattn_forward_params_t grew (or has tail padding): list the new version's size");
static_assert(FLASHATTN_FORWARD_PARAMS_SIZE_V1 % 8 == 0, "a version must end on an 8-byte boundary");
static_assert(FLASHATTN_FORWARD_PARAMS_SIZE_V1 <= FLASHATTN_PARAMS_MAX_SIZE);
static_assert(FLASHATTN_FORWARD_PARAMS_SIZE_V2 % 8 == 0, "a version must end on an 8-byte boundary");
static_assert(FLASHATTN_FORWARD_PARAMS_SIZE_V2 <= FLASHATTN_PARAMS_MAX_SIZE);

// The same for flashattn_backward_params_t.
constexpr size_t kBackwardParamsSizes[] = {FLASHATTN_BACKWARD_PARAMS_SIZE_V1, FLASHATTN_BACKWARD_PARAMS_SIZE_V2,
                                            FLASHATTN_BACKWARD_PARAMS_SIZE_V3};

static_assert(offsetof(flashattn_backward_params_t, struct_size) == 0, "struct_size must come first");
static_assert(kBackwardParamsSizes[std::size(kBackwardParamsSizes) - 1] == sizeof(flashattn_backward_params_t),
              "flashattn_backward_params_t grew (or has tail padding): list the new version's size");
static_assert(FLASHATTN_BACKWARD_PARAMS_SIZE_V1 % 8 == 0, "a version must end on an 8-byte boundary");
static_assert(FLASHATTN_BACKWARD_PARAMS_SIZE_V1 <= FLASHATTN_PARAMS_MAX_SIZE);
static_assert(FLASHATTN_BACKWARD_PARAMS_SIZE_V2 % 8 == 0, "a version must end on an 8-byte boundary");
static_assert(FLASHATTN_BACKWARD_PARAMS_SIZE_V3 % 8 == 0, "a version must end on an 8-byte boundary");
static_assert(FLASHATTN_BACKWARD_PARAMS_SIZE_V3 <= FLASHATTN_PARAMS_MAX_SIZE);

constexpr size_t kKvCacheParamsSizes[] = {FLASHATTN_KVCACHE_PARAMS_SIZE_V1, FLASHATTN_KVCACHE_PARAMS_SIZE_V2};
static_assert(kKvCacheParamsSizes[std::size(kKvCacheParamsSizes) - 1] == sizeof(flashattn_kvcache_params_t),
              "flashattn_kvcache_params_t grew (or has tail padding): list the new version's size");
static_assert(FLASHATTN_KVCACHE_PARAMS_SIZE_V1 % 8 == 0, "a version must end on an 8-byte boundary");

thread_local std::string g_last_error;

int fail(const flashattn::Status& s) {
  g_last_error = s.message();
  return static_cast<int>(s.code());
}

int invalid(std::string msg) {
  g_last_error = std::move(msg);
  return FLASHATTN_INVALID_ARGUMENT;
}

int null_arg(const char* name) { return invalid(std::string(name) + ": null tensor descriptor"); }

// What the size rule needs to know of one params struct type.
template <class Params>
struct ParamsInfo;
template <>
struct ParamsInfo<flashattn_forward_params_t> {
  static constexpr const char* kName = "flashattn_forward_params_t";
  static constexpr const char* kInit = "flashattn_forward_params_init";
  static constexpr size_t kFirst = FLASHATTN_FORWARD_PARAMS_SIZE_V1;
  static constexpr const size_t* kSizes = kForwardParamsSizes;
  static constexpr size_t kCount = std::size(kForwardParamsSizes);
};
template <>
struct ParamsInfo<flashattn_backward_params_t> {
  static constexpr const char* kName = "flashattn_backward_params_t";
  static constexpr const char* kInit = "flashattn_backward_params_init";
  static constexpr size_t kFirst = FLASHATTN_BACKWARD_PARAMS_SIZE_V1;
  static constexpr const size_t* kSizes = kBackwardParamsSizes;
  static constexpr size_t kCount = std::size(kBackwardParamsSizes);
};

template <>
struct ParamsInfo<flashattn_kvcache_params_t> {
  static constexpr const char* kName = "flashattn_kvcache_params_t";
  static constexpr const char* kInit = "flashattn_kvcache_params_init";
  static constexpr size_t kFirst = FLASHATTN_KVCACHE_PARAMS_SIZE_V1;
  static constexpr const size_t* kSizes = kKvCacheParamsSizes;
  static constexpr size_t kCount = std::size(kKvCacheParamsSizes);
};

// Copies the caller's struct into *out, fields it does not have set to their defaults (zero).
template <class Params>
int read_params(const Params* in, Params* out) {
  using Info = ParamsInfo<Params>;
  if (in == nullptr) return invalid("params: null pointer");
  const size_t size = in->struct_size;
  const size_t known = sizeof(Params);
  const std::string got = "params.struct_size: " + std::to_string(size);
  if (size < Info::kFirst)
    return invalid(got + " is smaller than the first version's " + std::to_string(Info::kFirst) +
                   " (set it with " + Info::kInit + " or to sizeof)");
  if (size > FLASHATTN_PARAMS_MAX_SIZE)
    return invalid(got + " exceeds " + std::to_string(FLASHATTN_PARAMS_MAX_SIZE) +
                   " (uninitialized struct?)");
  if (size > known) {
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(in);
    for (size_t i = known; i < size; ++i)
      if (bytes[i] != 0)
        return invalid(got + " is larger than this library's " + std::to_string(known) +
                       " and byte " + std::to_string(i) +
                       " is not zero: the caller sets a field from a newer flashattn_c.h that "
                       "this library does not know (upgrade libflashattn)");
  } else {
    bool listed = false;
    for (size_t i = 0; i < Info::kCount; ++i) listed = listed || Info::kSizes[i] == size;
    if (!listed) return invalid(got + " is not the size of any version of " + Info::kName);
  }
  std::memset(out, 0, known);
  std::memcpy(out, in, size < known ? size : known);
  out->struct_size = known;
  return FLASHATTN_OK;
}

int check_dtype(const flashattn_tensor_t& t, const char* name) {
  if (t.dtype < FLASHATTN_FP16 || t.dtype > FLASHATTN_FP32)
    return invalid(std::string(name) + ": unknown dtype value " + std::to_string(t.dtype));
  return FLASHATTN_OK;
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

// The C++ arguments for a caller's params struct (checked against the size rule first).
int build_args(const flashattn_forward_params_t* params, flashattn::ForwardArgs* a) {
  flashattn_forward_params_t p;
  if (int rc = read_params(params, &p)) return rc;
  if (int rc = check_dtype(p.q, "q")) return rc;
  if (int rc = check_dtype(p.k, "k")) return rc;
  if (int rc = check_dtype(p.v, "v")) return rc;
  if (int rc = check_dtype(p.out, "out")) return rc;
  if (p.reserved0 != 0) return invalid("params.reserved0: must be 0");
  if (p.reserved1 != 0) return invalid("params.reserved1: must be 0");
  if (p.reserved2 != 0) return invalid("params.reserved2: must be 0");
  a->window_left = p.window_left_plus1 - 1;
  a->window_right = p.window_right_plus1 - 1;
  a->softcap = p.softcap;
  a->alibi_slopes = p.alibi_slopes;
  a->alibi_batch_stride = p.alibi_batch_stride;
  a->cu_seqlens_q = p.cu_seqlens_q;
  a->cu_seqlens_k = p.cu_seqlens_k;
  a->num_seqs = p.num_seqs;
  a->max_seqlen_q = p.max_seqlen_q;
  a->max_seqlen_k = p.max_seqlen_k;
  a->q = to_ref(p.q);
  a->k = to_ref(p.k);
  a->v = to_ref(p.v);
  a->out = to_ref(p.out);
  a->lse = p.lse;
  a->softmax_scale = p.softmax_scale;
  a->causal = p.causal != 0;
  a->backend = static_cast<flashattn::Backend>(p.backend);  // range checked by validation
  return FLASHATTN_OK;
}

int build_args(const flashattn_backward_params_t* params, flashattn::BackwardArgs* a) {
  flashattn_backward_params_t p;
  if (int rc = read_params(params, &p)) return rc;
  const std::pair<const flashattn_tensor_t*, const char*> tensors[] = {
      {&p.dout, "dout"}, {&p.q, "q"},   {&p.k, "k"},   {&p.v, "v"},
      {&p.out, "out"},   {&p.dq, "dq"}, {&p.dk, "dk"}, {&p.dv, "dv"}};
  for (auto [t, name] : tensors)
    if (int rc = check_dtype(*t, name)) return rc;
  a->dout = to_ref(p.dout);
  a->q = to_ref(p.q);
  a->k = to_ref(p.k);
  a->v = to_ref(p.v);
  a->out = to_ref(p.out);
  a->lse = p.lse;  // null: validation names it
  a->dq = to_ref(p.dq);
  a->dk = to_ref(p.dk);
  a->dv = to_ref(p.dv);
  a->softmax_scale = p.softmax_scale;
  a->causal = p.causal != 0;
  a->deterministic = p.deterministic != 0;
  a->backend = static_cast<flashattn::Backend>(p.backend);  // range checked by validation
  if (p.reserved0 != 0) return invalid("params.reserved0: must be 0");
  a->window_left = p.window_left_plus1 - 1;
  a->window_right = p.window_right_plus1 - 1;
  a->softcap = p.softcap;
  a->alibi_slopes = p.alibi_slopes;
  a->alibi_batch_stride = p.alibi_batch_stride;
  a->cu_seqlens_q = p.cu_seqlens_q;
  a->cu_seqlens_k = p.cu_seqlens_k;
  a->num_seqs = p.num_seqs;
  a->max_seqlen_q = p.max_seqlen_q;
  a->max_seqlen_k = p.max_seqlen_k;
  a->zero_outside_rows = p.zero_outside_rows != 0;
  return FLASHATTN_OK;
}

// Version 1's fields from the positional entry points.
int positional_params(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                      const flashattn_tensor_t* v, const flashattn_tensor_t* out, float* lse,
                      float softmax_scale, int causal, int backend,
                      flashattn_forward_params_t* p) {
  if (!q) return null_arg("q");
  if (!k) return null_arg("k");
  if (!v) return null_arg("v");
  if (!out) return null_arg("out");
  flashattn_forward_params_init(p);
  p->q = *q;
  p->k = *k;
  p->v = *v;
  p->out = *out;
  p->lse = lse;
  p->softmax_scale = softmax_scale;
  p->causal = causal;
  p->backend = backend;
  return FLASHATTN_OK;
}

}  // namespace

extern "C" size_t flashattn_forward_params_size(void) { return sizeof(flashattn_forward_params_t); }

extern "C" int flashattn_forward_ex(const flashattn_forward_params_t* params, void* stream) {
  flashattn::ForwardArgs a;
  if (int rc = build_args(params, &a)) return rc;
  flashattn::Status s = flashattn::forward(a, static_cast<cudaStream_t>(stream));
  return s.ok() ? FLASHATTN_OK : fail(s);
}

extern "C" int flashattn_resolve_backend_ex(const flashattn_forward_params_t* params, int* chosen) {
  flashattn::ForwardArgs a;
  if (int rc = build_args(params, &a)) return rc;
  if (chosen == nullptr) return invalid("chosen: null pointer");
  flashattn::Backend b = flashattn::Backend::kReference;
  flashattn::Status s = flashattn::resolve_backend(a, &b);
  if (!s.ok()) return fail(s);
  *chosen = static_cast<int>(b);
  return FLASHATTN_OK;
}

extern "C" size_t flashattn_backward_params_size(void) { return sizeof(flashattn_backward_params_t); }

extern "C" int flashattn_backward_ex(const flashattn_backward_params_t* params, void* stream) {
  flashattn::BackwardArgs a;
  if (int rc = build_args(params, &a)) return rc;
  flashattn::Status s = flashattn::backward(a, static_cast<cudaStream_t>(stream));
  return s.ok() ? FLASHATTN_OK : fail(s);
}

extern "C" int flashattn_resolve_backward_backend_ex(const flashattn_backward_params_t* params,
                                                     int* chosen) {
  flashattn::BackwardArgs a;
  if (int rc = build_args(params, &a)) return rc;
  if (chosen == nullptr) return invalid("chosen: null pointer");
  flashattn::Backend b = flashattn::Backend::kReference;
  flashattn::Status s = flashattn::resolve_backend(a, &b);
  if (!s.ok()) return fail(s);
  *chosen = static_cast<int>(b);
  return FLASHATTN_OK;
}

extern "C" int flashattn_forward(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                                 const flashattn_tensor_t* v, const flashattn_tensor_t* out,
                                 float* lse, float softmax_scale, int causal, int backend,
                                 void* stream) {
  flashattn_forward_params_t p;
  if (int rc = positional_params(q, k, v, out, lse, softmax_scale, causal, backend, &p)) return rc;
  return flashattn_forward_ex(&p, stream);
}

extern "C" int flashattn_resolve_backend(const flashattn_tensor_t* q, const flashattn_tensor_t* k,
                                         const flashattn_tensor_t* v,
                                         const flashattn_tensor_t* out, float* lse,
                                         float softmax_scale, int causal, int backend,
                                         int* chosen) {
  flashattn_forward_params_t p;
  if (int rc = positional_params(q, k, v, out, lse, softmax_scale, causal, backend, &p)) return rc;
  return flashattn_resolve_backend_ex(&p, chosen);
}

extern "C" size_t flashattn_kvcache_params_size(void) { return sizeof(flashattn_kvcache_params_t); }

extern "C" int flashattn_kvcache_ex(const flashattn_kvcache_params_t* params, void* stream) {
  flashattn_kvcache_params_t p;
  if (int rc = read_params(params, &p)) return rc;
  const std::pair<const flashattn_tensor_t*, const char*> tensors[] = {
      {&p.q, "q"}, {&p.k_cache, "k_cache"}, {&p.v_cache, "v_cache"}, {&p.out, "out"}, {&p.k_new, "k_new"}, {&p.v_new, "v_new"}};
  for (auto [t, name] : tensors)
    if ((t->data != nullptr || (t != &p.k_new && t != &p.v_new)) && check_dtype(*t, name)) return FLASHATTN_INVALID_ARGUMENT;
  flashattn::KvCacheArgs a;
  a.q = to_ref(p.q);
  a.k_cache = to_ref(p.k_cache);
  a.v_cache = to_ref(p.v_cache);
  if (p.k_new.data != nullptr || p.v_new.data != nullptr) {
    a.k_new = to_ref(p.k_new);
    a.v_new = to_ref(p.v_new);
  }
  a.out = to_ref(p.out);
  a.lse = p.lse;
  a.cache_seqlens = p.cache_seqlens;
  a.cache_seqlen = p.cache_seqlen;
  a.block_table = p.block_table;
  a.block_table_stride = p.block_table_stride;
  a.max_pages = p.max_pages;
  a.softmax_scale = p.softmax_scale;
  a.causal = p.causal != 0;
  a.num_splits = p.num_splits;
  a.backend = static_cast<flashattn::Backend>(p.backend);
  if (p.reserved0 != 0) return invalid("params.reserved0: must be 0");
  a.window_left = p.window_left_plus1 - 1;
  a.window_right = p.window_right_plus1 - 1;
  a.softcap = p.softcap;
  a.alibi_slopes = p.alibi_slopes;
  a.alibi_batch_stride = p.alibi_batch_stride;
  flashattn::Status s = flashattn::forward_kvcache(a, static_cast<cudaStream_t>(stream));
  return s.ok() ? FLASHATTN_OK : fail(s);
}

extern "C" const char* flashattn_last_error(void) { return g_last_error.c_str(); }
extern "C" const char* flashattn_version(void) { return flashattn::version(); }
