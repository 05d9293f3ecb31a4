// The KV-cache entry point (flash_attn_with_kvcache): validation of KvCacheArgs into
// KvCacheParams, and dispatch to the family-neutral decode kernels (src/decode, cc >= 8.0).
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "api/backends.h"
#include "api/validate.h"
#include "common/device_info.h"
#include "decode/kvcache.h"

namespace flashattn {
namespace detail {
namespace {

Status invalid(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
std::string str(int64_t x) { return std::to_string(x); }

bool is_head_dim(int64_t d) { return d >= 8 && d <= 256 && d % 8 == 0; }

}  // namespace

Status validate_and_convert(const KvCacheArgs& a, KvCacheParams* p, bool* empty_out) {
  const bool has_new = a.k_new.data != nullptr || a.v_new.data != nullptr;
  std::pair<const TensorRef*, const char*> all[] = {{&a.q, "q"},         {&a.k_cache, "k_cache"},
                                                    {&a.v_cache, "v_cache"}, {&a.out, "out"},
                                                    {&a.k_new, "k_new"},     {&a.v_new, "v_new"}};
  const int n_tensors = has_new ? 6 : 4;
  for (int i = 0; i < n_tensors; ++i) {
    if (Status s = check_dtype16(*all[i].first, all[i].second); !s.ok()) return s;
    if (all[i].first->dtype != a.q.dtype)
      return invalid(std::string(all[i].second) + ": dtype differs from q's");
    if (Status s = check_tensor_layout(*all[i].first, all[i].second, /*empty=*/true); !s.ok()) return s;
  }
  if (has_new && (a.k_new.data == nullptr || a.v_new.data == nullptr))
    return invalid(std::string(a.k_new.data == nullptr ? "k_new" : "v_new") +
                   ": null while the other of k_new / v_new is given (both or neither)");

  const bool paged = a.block_table != nullptr;
  const int64_t B = a.q.shape[0], Sq = a.q.shape[1], Hq = a.q.shape[2], D = a.q.shape[3];
  const int64_t Hkv = a.k_cache.shape[2], Dv = a.v_cache.shape[3];
  if (a.k_cache.shape[3] != D) return invalid("k_cache: head dim " + str(a.k_cache.shape[3]) + " differs from q's " + str(D));
  for (int i = 0; i < 3; ++i)
    if (a.v_cache.shape[i] != a.k_cache.shape[i])
      return invalid("v_cache: shape " + shape_string(a.v_cache) + " differs from k_cache's " +
                     shape_string(a.k_cache) + " outside the head dim");
  if (!paged && a.k_cache.shape[0] != B)
    return invalid("k_cache: batch " + str(a.k_cache.shape[0]) + " differs from q's " + str(B) +
                   " (a contiguous cache is (B, S_cache, Hkv, D); pass block_table for a paged one)");
  const int64_t out_want[4] = {B, Sq, Hq, Dv};
  for (int i = 0; i < 4; ++i)
    if (a.out.shape[i] != out_want[i])
      return invalid("out: shape " + shape_string(a.out) + " must be q's (B, Sq, Hq) with v_cache's head dim");
  const int64_t s_new = has_new ? a.k_new.shape[1] : 0;
  if (has_new) {
    const int64_t kw[4] = {B, s_new, Hkv, D}, vw[4] = {B, s_new, Hkv, Dv};
    for (int i = 0; i < 4; ++i) {
      if (a.k_new.shape[i] != kw[i])
        return invalid("k_new: shape " + shape_string(a.k_new) + " must be (B, S_new, Hkv, D) = (" + str(B) + ", " +
                       str(s_new) + ", " + str(Hkv) + ", " + str(D) + ")");
      if (a.v_new.shape[i] != vw[i])
        return invalid("v_new: shape " + shape_string(a.v_new) + " must be (B, S_new, Hkv, Dv) = (" + str(B) + ", " +
                       str(s_new) + ", " + str(Hkv) + ", " + str(Dv) + ")");
    }
  }
  if (!std::isfinite(a.softmax_scale) || a.softmax_scale < 0.f)
    return invalid("softmax_scale: must be finite and >= 0 (0 means 1/sqrt(D)), got " + std::to_string(a.softmax_scale));
  if (a.num_splits < 0 || a.num_splits > 1024) return invalid("num_splits: " + str(a.num_splits) + " not in 0..1024");
  if (Status s = check_score_mods(a, a.q.shape[2]); !s.ok()) return s;
  const int ab = static_cast<int>(a.backend);
  if (ab < 0 || ab > static_cast<int>(Backend::kReference)) return invalid("backend: unknown value " + str(ab));
  if (a.backend == Backend::kReference)
    return {StatusCode::kNotSupported, "backend reference: no naive KV-cache kernel (use auto, sm90 or sm80)"};
  if (D == 0) return invalid("q: head dim 0 not supported (a multiple of 8, 8 to 256)");
  if (Dv == 0) return invalid("v_cache: head dim 0 not supported (a multiple of 8, 8 to 256)");
  if (a.cache_seqlens != nullptr && reinterpret_cast<uintptr_t>(a.cache_seqlens) % 4 != 0)
    return invalid("cache_seqlens: pointer is not 4-byte aligned");
  if (a.cache_seqlens == nullptr && a.cache_seqlen < 0)
    return invalid("cache_seqlen: negative (" + str(a.cache_seqlen) + ")");

  // Capacity of one sequence's cache.
  int64_t capacity = 0, page_size = 0;
  if (paged) {
    if (reinterpret_cast<uintptr_t>(a.block_table) % 4 != 0) return invalid("block_table: pointer is not 4-byte aligned");
    page_size = a.k_cache.shape[1];
    if (page_size <= 0 || page_size % 16 != 0)
      return invalid("k_cache: page size (dim 1) " + str(page_size) + " must be a positive multiple of 16");
    if (a.max_pages <= 0) return invalid("max_pages: must be > 0 with a block_table (got " + str(a.max_pages) + ")");
    if (a.block_table_stride != 0 && a.block_table_stride < a.max_pages)
      return invalid("block_table_stride: " + str(a.block_table_stride) + " is below max_pages " + str(a.max_pages));
    capacity = int64_t(a.max_pages) * page_size;
  } else {
    if (a.max_pages != 0 || a.block_table_stride != 0)
      return invalid("max_pages / block_table_stride: set without a block_table");
    capacity = a.k_cache.shape[1];
  }
  if (capacity > std::numeric_limits<int32_t>::max()) return invalid("k_cache: capacity above 2^31-1 keys");
  if (a.cache_seqlens == nullptr && a.cache_seqlen + s_new > capacity)
    return invalid("cache_seqlen: " + str(a.cache_seqlen) + " + S_new " + str(s_new) + " exceeds the cache's " +
                   str(capacity) + " keys");
  if (s_new > capacity) return invalid("k_new: S_new " + str(s_new) + " exceeds the cache's " + str(capacity) + " keys");

  const bool empty = B == 0 || Sq == 0 || Hq == 0;
  if (empty) {
    if (empty_out) *empty_out = true;
    return Status::Ok();
  }
  if (!is_head_dim(D)) return invalid("q: head dim " + str(D) + " not supported (a multiple of 8, 8 to 256)");
  if (!is_head_dim(Dv)) return invalid("v_cache: head dim " + str(Dv) + " not supported (a multiple of 8, 8 to 256)");
  if (Hkv == 0 || Hq % Hkv != 0) return invalid("k_cache: heads " + str(Hkv) + " must divide q's heads " + str(Hq));
  if (a.k_cache.shape[0] == 0 || a.k_cache.shape[1] == 0) return invalid("k_cache: no rows (shape " + shape_string(a.k_cache) + ")");
  for (int i = 0; i < n_tensors; ++i) {
    const bool no_elems = all[i].first->shape[0] * all[i].first->shape[1] == 0;  // k_new with S_new 0
    if (Status s = check_tensor_layout(*all[i].first, all[i].second, no_elems); !s.ok()) return s;
  }
  if (a.lse != nullptr && reinterpret_cast<uintptr_t>(a.lse) % alignof(float) != 0)
    return invalid("lse: pointer is not 4-byte aligned");
  // out is written while q, the caches and the new keys are read.
  for (int i = 0; i < n_tensors; ++i) {
    if (all[i].first == &a.out) continue;
    if (overlap(byte_set(a.out), byte_set(*all[i].first)) != Overlap::kDisjoint)
      return invalid(std::string("out: shares memory with ") + all[i].second);
  }
  if (has_new)
    for (const TensorRef* c : {&a.k_cache, &a.v_cache})
      for (const TensorRef* n : {&a.k_new, &a.v_new})
        if (overlap(byte_set(*c), byte_set(*n)) != Overlap::kDisjoint)
          return invalid(std::string(n == &a.k_new ? "k_new" : "v_new") + ": shares memory with " +
                         (c == &a.k_cache ? "k_cache" : "v_cache") + " (the append writes the cache)");

  if (empty_out) *empty_out = false;
  if (p == nullptr) return Status::Ok();
  KvCacheParams& r = *p;
  r = KvCacheParams{};
  r.q = {a.q.data, a.q.stride[0], a.q.stride[1], a.q.stride[2]};
  r.k = {a.k_cache.data, a.k_cache.stride[0], a.k_cache.stride[1], a.k_cache.stride[2]};
  r.v = {a.v_cache.data, a.v_cache.stride[0], a.v_cache.stride[1], a.v_cache.stride[2]};
  r.k_cache = {a.k_cache.data, a.k_cache.stride[0], a.k_cache.stride[1], a.k_cache.stride[2]};
  r.v_cache = {a.v_cache.data, a.v_cache.stride[0], a.v_cache.stride[1], a.v_cache.stride[2]};
  if (has_new && s_new > 0) {
    r.k_new = {a.k_new.data, a.k_new.stride[0], a.k_new.stride[1], a.k_new.stride[2]};
    r.v_new = {a.v_new.data, a.v_new.stride[0], a.v_new.stride[1], a.v_new.stride[2]};
  }
  r.s_new = static_cast<int>(s_new);
  r.o = {a.out.data, a.out.stride[0], a.out.stride[1], a.out.stride[2]};
  r.lse = a.lse;
  r.b = static_cast<int>(B);
  r.sq = static_cast<int>(Sq);
  r.sk = static_cast<int>(capacity);
  r.hq = static_cast<int>(Hq);
  r.hkv = static_cast<int>(Hkv);
  r.d = static_cast<int>(D);
  r.d_v = static_cast<int>(Dv);
  r.h_ratio = static_cast<int>(Hq / Hkv);
  r.scale = a.softmax_scale > 0.f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(D));
  r.scale_log2 = r.scale * kLog2e;
  r.causal = a.causal;
  r.dtype = a.q.dtype == DType::kFloat16 ? ElemType::kFloat16 : ElemType::kBFloat16;
  set_score_mods(a, r);
  r.cache_seqlens = a.cache_seqlens;
  r.cache_seqlen = a.cache_seqlen;
  if (paged) {
    r.block_table = a.block_table;
    r.block_table_stride = a.block_table_stride != 0 ? a.block_table_stride : a.max_pages;
    r.page_size = static_cast<int>(page_size);
    r.max_pages = a.max_pages;
    r.num_pages = static_cast<int>(a.k_cache.shape[0]);
  }
  r.num_splits = a.num_splits;
  return Status::Ok();
}

}  // namespace detail

Status validate(const KvCacheArgs& args) { return detail::validate_and_convert(args, nullptr, nullptr); }

Status forward_kvcache(const KvCacheArgs& args, cudaStream_t stream) {
  detail::KvCacheParams p;
  bool empty = false;
  Status s = detail::validate_and_convert(args, &p, &empty);
  if (!s.ok() || empty) return s;
  detail::DeviceInfo dev;
  if (s = detail::current_device_info(&dev); !s.ok()) return s;
  if (dev.major < 8)
    return {StatusCode::kNoDevice, "device has compute capability " + std::to_string(dev.major) + "." +
                                       std::to_string(dev.minor) + "; flashattn needs 8.0 or newer"};
  if (args.backend == Backend::kSm90 && !(dev.major == 9 && dev.minor == 0))
    return {StatusCode::kNotSupported, "backend sm90 needs compute capability 9.0"};
  return detail::kvcache_forward(p, stream);
}

}  // namespace flashattn
