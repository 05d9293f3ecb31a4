#include "api/validate.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace flashattn::detail {
namespace {

Status invalid(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
  }
  return "unknown";
}

bool is_supported_head_dim(int64_t d) {
  return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
}

std::string shape_str(const TensorRef& t) {
  return "(" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) + ", " +
         std::to_string(t.shape[2]) + ", " + std::to_string(t.shape[3]) + ")";
}

// Largest element offset reachable in `t` must fit int64 (and so must its byte offset).
bool offsets_fit(const TensorRef& t) {
  __int128 max_off = 0;
  for (int i = 0; i < 4; ++i) max_off += static_cast<__int128>(t.shape[i] - 1) * t.stride[i];
  const __int128 bytes = (max_off + 1) * 2;
  return bytes <= static_cast<__int128>(std::numeric_limits<int64_t>::max());
}

Status check_tensor_layout(const TensorRef& t, const char* name, bool empty) {
  for (int i = 0; i < 4; ++i) {
    if (t.shape[i] < 0) return invalid(std::string(name) + ": negative size " + shape_str(t));
    if (t.shape[i] > std::numeric_limits<int32_t>::max())
      return invalid(std::string(name) + ": size " + std::to_string(t.shape[i]) + " in dim " +
                     std::to_string(i) + " exceeds 2^31-1");
    if (t.stride[i] < 0)
      return invalid(std::string(name) + ": negative stride in dim " + std::to_string(i));
  }
  if (empty) return Status::Ok();
  if (t.stride[3] != 1)
    return invalid(std::string(name) + ": headdim stride must be 1 (got " +
                   std::to_string(t.stride[3]) + ")");
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] % 8 != 0)
      return invalid(std::string(name) + ": stride " + std::to_string(t.stride[i]) + " of dim " +
                     std::to_string(i) + " is not a multiple of 8 elements (16 bytes)");
  if (t.data == nullptr) return invalid(std::string(name) + ": null data pointer");
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return invalid(std::string(name) + ": base pointer is not 16-byte aligned");
  if (!offsets_fit(t))
    return invalid(std::string(name) + ": element offsets overflow int64 for shape " +
                   shape_str(t));
  return Status::Ok();
}

}  // namespace

Status validate_and_convert(const ForwardArgs& a, FwdParams* p, bool* empty_out) {
  const TensorRef& q = a.q;
  const TensorRef& k = a.k;
  const TensorRef& v = a.v;
  const TensorRef& o = a.out;

  // dtypes first: every later message can assume one 16-bit dtype.
  const std::pair<const TensorRef*, const char*> all[] = {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&o, "out"}};
  for (auto [t, name] : all) {
    if (t->dtype != DType::kFloat16 && t->dtype != DType::kBFloat16)
      return invalid(std::string(name) + ": unsupported dtype " + dtype_name(t->dtype) +
                     " (float16 or bfloat16)");
  }
  for (auto [t, name] : all) {
    if (t->dtype != q.dtype)
      return invalid(std::string(name) + ": dtype " + dtype_name(t->dtype) +
                     " differs from q's " + dtype_name(q.dtype));
  }

  bool empty = false;
  for (auto [t, name] : all)
    for (int i = 0; i < 4; ++i) empty = empty || t->shape[i] == 0;
  for (auto [t, name] : all) {
    Status s = check_tensor_layout(*t, name, /*empty=*/true);  // sizes and strides signs only
    if (!s.ok()) return s;
  }

  const int64_t B = q.shape[0], Sq = q.shape[1], Hq = q.shape[2], D = q.shape[3];
  const int64_t Sk = k.shape[1], Hkv = k.shape[2];
  if (k.shape[3] != D)
    return invalid("k: head dim " + std::to_string(k.shape[3]) + " differs from q's " +
                   std::to_string(D));
  if (v.shape[3] != D)
    return invalid("v: head dim " + std::to_string(v.shape[3]) + " differs from q's " +
                   std::to_string(D) + " (Dv != D is not supported)");
  if (k.shape[0] != B || v.shape[0] != B)
    return invalid(std::string(k.shape[0] != B ? "k" : "v") + ": batch " +
                   std::to_string(k.shape[0] != B ? k.shape[0] : v.shape[0]) +
                   " differs from q's " + std::to_string(B));
  if (v.shape[1] != Sk)
    return invalid("v: seqlen " + std::to_string(v.shape[1]) + " differs from k's " +
                   std::to_string(Sk));
  if (v.shape[2] != Hkv)
    return invalid("v: heads " + std::to_string(v.shape[2]) + " differs from k's " +
                   std::to_string(Hkv));
  for (int i = 0; i < 4; ++i)
    if (o.shape[i] != q.shape[i])
      return invalid("out: shape " + shape_str(o) + " differs from q's " + shape_str(q));
  if (!std::isfinite(a.softmax_scale) || a.softmax_scale < 0.f)
    return invalid("softmax_scale: must be finite and >= 0 (0 means 1/sqrt(D)), got " +
                   std::to_string(a.softmax_scale));
  const int ab = static_cast<int>(a.backend);
  if (ab < 0 || ab > static_cast<int>(Backend::kReference))
    return invalid("backend: unknown value " + std::to_string(ab));

  if (empty) {
    if (empty_out) *empty_out = true;
    return Status::Ok();
  }
  if (!is_supported_head_dim(D))
    return invalid("q: head dim " + std::to_string(D) + " not supported (64, 96, 128, 192, 256)");
  if (Hkv == 0 || Hq % Hkv != 0)
    return invalid("k: heads " + std::to_string(Hkv) + " must divide q's heads " +
                   std::to_string(Hq));
  for (auto [t, name] : all) {
    Status s = check_tensor_layout(*t, name, /*empty=*/false);
    if (!s.ok()) return s;
  }
  if (a.lse != nullptr && reinterpret_cast<uintptr_t>(a.lse) % alignof(float) != 0)
    return invalid("lse: pointer is not 4-byte aligned");
  {
    const __int128 lse_elems = static_cast<__int128>(B) * Hq * Sq * 4;
    if (lse_elems > static_cast<__int128>(std::numeric_limits<int64_t>::max()))
      return invalid("lse: size B*Hq*Sq overflows int64");
  }

  if (empty_out) *empty_out = false;
  if (p == nullptr) return Status::Ok();
  FwdParams& r = *p;
  r = FwdParams{};
  r.q = {q.data, q.stride[0], q.stride[1], q.stride[2]};
  r.k = {k.data, k.stride[0], k.stride[1], k.stride[2]};
  r.v = {v.data, v.stride[0], v.stride[1], v.stride[2]};
  r.o = {o.data, o.stride[0], o.stride[1], o.stride[2]};
  r.lse = a.lse;
  r.b = static_cast<int>(B); r.sq = static_cast<int>(Sq); r.sk = static_cast<int>(Sk);
  r.hq = static_cast<int>(Hq); r.hkv = static_cast<int>(Hkv); r.d = static_cast<int>(D);
  r.h_ratio = static_cast<int>(Hq / Hkv);
  r.scale = a.softmax_scale > 0.f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(D));
  r.scale_log2 = r.scale * 1.4426950408889634f;
  r.causal = a.causal;
  r.dtype = q.dtype == DType::kFloat16 ? ElemType::kFloat16 : ElemType::kBFloat16;
  return Status::Ok();
}

}  // namespace flashattn::detail
