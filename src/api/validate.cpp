#include "api/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

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

// Any multiple of 8 up to 256: 16-byte rows (TMA and cp.async move 16-byte chunks); kernels
// serve a head dim with the smallest instantiated one that covers it.
bool is_supported_head_dim(int64_t d) {
  return d >= 8 && d <= 256 && d % 8 == 0;
}

std::string shape_str(const TensorRef& t) {
  return "(" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) + ", " +
         std::to_string(t.shape[2]) + ", " + std::to_string(t.shape[3]) + ")";
}

std::string stride_str(const TensorRef& t) {
  return "(" + std::to_string(t.stride[0]) + ", " + std::to_string(t.stride[1]) + ", " +
         std::to_string(t.stride[2]) + ", " + std::to_string(t.stride[3]) + ")";
}

// Largest element offset reachable in `t` must fit int64 (and so must its byte offset).
bool offsets_fit(const TensorRef& t) {
  __int128 max_off = 0;
  for (int i = 0; i < 4; ++i) max_off += static_cast<__int128>(t.shape[i] - 1) * t.stride[i];
  const __int128 bytes = (max_off + 1) * 2;
  return bytes <= static_cast<__int128>(std::numeric_limits<int64_t>::max());
}

}  // namespace

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

Status check_dtype16(const TensorRef& t, const char* name) {
  if (t.dtype != DType::kFloat16 && t.dtype != DType::kBFloat16)
    return invalid(std::string(name) + ": unsupported dtype " + dtype_name(t.dtype) +
                   " (float16 or bfloat16)");
  return Status::Ok();
}

std::string shape_string(const TensorRef& t) { return shape_str(t); }

namespace {

bool has_elements(const TensorRef& t) {
  return t.shape[0] > 0 && t.shape[1] > 0 && t.shape[2] > 0 && t.shape[3] > 0;
}

}  // namespace

namespace {
Status validate_and_convert_dense(const ForwardArgs& a, FwdParams* p, bool* empty_out);
}

// Varlen calls (cu_seqlens_q set): the packed tensors checked as a one-batch dense call, then
// the varlen arguments; the params then describe sequences, not the packed batch.
Status validate_and_convert(const ForwardArgs& a, FwdParams* p, bool* empty_out) {
  const bool varlen = a.cu_seqlens_q != nullptr || a.cu_seqlens_k != nullptr || a.num_seqs != 0 ||
                      a.max_seqlen_q != 0 || a.max_seqlen_k != 0;
  if (!varlen) return validate_and_convert_dense(a, p, empty_out);
  if (a.cu_seqlens_q == nullptr) return invalid("cu_seqlens_q: null (needed by a varlen call: cu_seqlens_k, num_seqs or max_seqlen_* set)");
  if (a.cu_seqlens_k == nullptr) return invalid("cu_seqlens_k: null (cu_seqlens_q is set: a varlen call)");
  if (reinterpret_cast<uintptr_t>(a.cu_seqlens_q) % 4 != 0) return invalid("cu_seqlens_q: pointer is not 4-byte aligned");
  if (reinterpret_cast<uintptr_t>(a.cu_seqlens_k) % 4 != 0) return invalid("cu_seqlens_k: pointer is not 4-byte aligned");
  if (a.num_seqs < 0) return invalid("num_seqs: negative (" + std::to_string(a.num_seqs) + ")");
  if (a.num_seqs > 65535 * 1024) return invalid("num_seqs: " + std::to_string(a.num_seqs) + " above 67107840");
  if (a.max_seqlen_q < 0) return invalid("max_seqlen_q: negative (" + std::to_string(a.max_seqlen_q) + ")");
  if (a.max_seqlen_k < 0) return invalid("max_seqlen_k: negative (" + std::to_string(a.max_seqlen_k) + ")");
  const std::pair<const TensorRef*, const char*> packed[] = {{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.out, "out"}};
  for (auto [t, name] : packed)
    if (t->shape[0] != 1)
      return invalid(std::string(name) + ": a varlen call packs the sequences into dim 1: shape " + shape_str(*t) +
                     " must have dim 0 == 1");
  bool empty = false;
  Status s = validate_and_convert_dense(a, p, &empty);
  if (!s.ok()) return s;
  const int64_t total_q = a.q.shape[1], total_k = a.k.shape[1];
  // Nothing to compute without query rows or heads. Sequences without keys are computed (out
  // 0, lse -inf), but a call whose k has no rows at all is refused: the kernels' K/V views
  // need one row.
  const bool q_rows = total_q > 0 && a.q.shape[2] > 0 && a.num_seqs > 0 && a.max_seqlen_q > 0;
  if (q_rows && total_k == 0 && a.k.shape[2] > 0)
    return invalid("k: no rows (total_k 0): a varlen call needs at least one key row (sequences of length 0 are fine)");
  const bool no_work = empty || !q_rows;
  if (empty_out) *empty_out = no_work;
  if (p != nullptr && !no_work) {
    p->cu_q = a.cu_seqlens_q;
    p->cu_k = a.cu_seqlens_k;
    p->b = a.num_seqs;
    // No sequence is longer than the packed rows: a generous max costs no empty tiles.
    p->sq = static_cast<int>(std::min<int64_t>(a.max_seqlen_q, total_q));
    p->sk = static_cast<int>(std::min<int64_t>(a.max_seqlen_k, total_k));
    p->total_q = static_cast<int>(total_q);
    p->total_k = static_cast<int>(total_k);
  }
  return Status::Ok();
}

namespace {
Status validate_and_convert_dense(const ForwardArgs& a, FwdParams* p, bool* empty_out) {
  const TensorRef& q = a.q;
  const TensorRef& k = a.k;
  const TensorRef& v = a.v;
  const TensorRef& o = a.out;

  // dtypes first: every later message can assume one 16-bit dtype.
  const std::pair<const TensorRef*, const char*> all[] = {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&o, "out"}};
  for (auto [t, name] : all) {
    Status s = check_dtype16(*t, name);
    if (!s.ok()) return s;
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
  const int64_t Sk = k.shape[1], Hkv = k.shape[2], Dv = v.shape[3];
  if (k.shape[3] != D)
    return invalid("k: head dim " + std::to_string(k.shape[3]) + " differs from q's " +
                   std::to_string(D));
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
  // out is (B, Sq, Hq) like q, with v's head dim.
  for (int i = 0; i < 4; ++i)
    if (o.shape[i] != (i == 3 ? Dv : q.shape[i]))
      return invalid("out: shape " + shape_str(o) + " must be q's (B, Sq, Hq) with v's head dim: (" +
                     std::to_string(B) + ", " + std::to_string(Sq) + ", " + std::to_string(Hq) + ", " +
                     std::to_string(Dv) + ")");
  if (!std::isfinite(a.softmax_scale) || a.softmax_scale < 0.f)
    return invalid("softmax_scale: must be finite and >= 0 (0 means 1/sqrt(D)), got " +
                   std::to_string(a.softmax_scale));
  const int ab = static_cast<int>(a.backend);
  if (ab < 0 || ab > static_cast<int>(Backend::kReference))
    return invalid("backend: unknown value " + std::to_string(ab));
  if (Status s = check_score_mods(a, q.shape[2]); !s.ok()) return s;

  // A zero head dim is not an empty call: out (Dv > 0) would be the mean of v's rows, lse
  // (Dv = 0) log(Sk). Neither is worth a code path: refused even when other sizes are 0.
  if (D == 0) return invalid("q: head dim 0 not supported (a multiple of 8, 8 to 256)");
  if (Dv == 0) return invalid("v: head dim 0 not supported (a multiple of 8, 8 to 256)");
  if (empty) {
    if (empty_out) *empty_out = true;
    return Status::Ok();
  }
  if (!is_supported_head_dim(D))
    return invalid("q: head dim " + std::to_string(D) + " not supported (a multiple of 8, 8 to 256)");
  if (!is_supported_head_dim(Dv))
    return invalid("v: head dim " + std::to_string(Dv) + " not supported (a multiple of 8, 8 to 256)");
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
  r.d_v = static_cast<int>(Dv);
  r.h_ratio = static_cast<int>(Hq / Hkv);
  r.scale = a.softmax_scale > 0.f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(D));
  r.scale_log2 = r.scale * kLog2e;
  r.causal = a.causal;
  r.dtype = q.dtype == DType::kFloat16 ? ElemType::kFloat16 : ElemType::kBFloat16;
  set_score_mods(a, r);
  return Status::Ok();
}
}  // namespace

Status check_score_mods(int window_left, int window_right, float softcap, const float* alibi_slopes,
                        int64_t alibi_batch_stride, int64_t hq) {
  if (window_left < -1) return invalid("window_left: " + std::to_string(window_left) + " (-1 for unbounded, or >= 0)");
  if (window_right < -1) return invalid("window_right: " + std::to_string(window_right) + " (-1 for unbounded, or >= 0)");
  if (!std::isfinite(softcap) || softcap < 0.f)
    return invalid("softcap: must be finite and >= 0 (0 means off), got " + std::to_string(softcap));
  if (alibi_slopes != nullptr && reinterpret_cast<uintptr_t>(alibi_slopes) % 4 != 0)
    return invalid("alibi_slopes: pointer is not 4-byte aligned");
  if (alibi_batch_stride < 0 || (alibi_batch_stride != 0 && alibi_batch_stride < hq))
    return invalid("alibi_batch_stride: " + std::to_string(alibi_batch_stride) +
                   " (0 for one (Hq,) vector, else >= Hq = " + std::to_string(hq) + ")");
  return Status::Ok();
}

// ---- Overlap of two strided views ----
//
// Comparing [first byte, last byte] extents alone would reject packed layouts whose views
// interleave without sharing a byte (dq, dk, dv as slices of one (B, S, 3, H, D) buffer), so
// views whose extents meet are split along their outer dimensions until the pieces' extents
// are disjoint or both pieces are contiguous runs.
namespace {

using Addr = __int128;  // base + extent may pass int64 even when the extent alone fits

// A ByteSet reduced to what decides overlap: dimensions sorted by stride (outermost first),
// none of size 1 or stride 0 (they add no bytes), none that merely extend the contiguous run.
struct Norm {
  Addr base = 0;
  int rank = 0;
  int64_t n[4] = {}, s[4] = {};
  Addr ext[5] = {};  // ext[k]: bytes spanned by dims k.. plus the run, from the piece's base
};

// (stride, size) pairs by stride, largest first. Hand-written: at most 4 entries, and GCC 12
// flags std::sort's unrolled insertion on a 4-entry array (-Warray-bounds false positive).
void sort_outer_first(std::pair<int64_t, int64_t>* dims, int r) {
  for (int i = 1; i < r; ++i)
    for (int j = i; j > 0 && dims[j - 1].first < dims[j].first; --j) std::swap(dims[j - 1], dims[j]);
}

bool normalize(const ByteSet& v, Norm* out) {
  if (v.block <= 0) return false;
  std::pair<int64_t, int64_t> dims[4];  // (stride, size)
  int r = 0;
  for (int k = 0; k < v.rank; ++k) {
    if (v.size[k] <= 0) return false;
    if (v.size[k] > 1 && v.stride[k] != 0) dims[r++] = {v.stride[k], v.size[k]};
  }
  sort_outer_first(dims, r);
  int64_t block = v.block;
  // An innermost dimension whose step does not pass the run's end only lengthens the run.
  while (r > 0 && dims[r - 1].first <= block) {
    block += (dims[r - 1].second - 1) * dims[r - 1].first;
    --r;
  }
  Norm& m = *out;
  m = Norm{};
  m.base = static_cast<Addr>(v.base);
  for (int k = 0; k < r; ++k) {
    // (n0, s0) over (n1, s1) with s0 == n1 * s1 is one dimension of n0 * n1 steps of s1.
    if (m.rank > 0 && m.s[m.rank - 1] == dims[k].second * dims[k].first) {
      m.n[m.rank - 1] *= dims[k].second;
      m.s[m.rank - 1] = dims[k].first;
    } else {
      m.n[m.rank] = dims[k].second;
      m.s[m.rank] = dims[k].first;
      ++m.rank;
    }
  }
  m.ext[m.rank] = block;
  for (int k = m.rank - 1; k >= 0; --k) m.ext[k] = m.ext[k + 1] + Addr(m.n[k] - 1) * m.s[k];
  return true;
}

Addr floor_div(Addr a, Addr b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Enough for any layout a framework produces (a few dozen steps); a pair that needs more
// interleaves at a fine grain and gets kUnknown rather than an unbounded search.
constexpr int kOverlapBudget = 1 << 16;

struct OverlapSearch {
  const Norm& a;
  const Norm& b;
  int budget = kOverlapBudget;

  // Do a's piece from dimension ka at base pa and b's from kb at pb share a byte?
  Overlap run(int ka, Addr pa, int kb, Addr pb) {
    if (--budget < 0) return Overlap::kUnknown;
    const Addr a_end = pa + a.ext[ka], b_end = pb + b.ext[kb];
    if (a_end <= pb || b_end <= pa) return Overlap::kDisjoint;
    if (ka == a.rank && kb == b.rank) return Overlap::kOverlap;  // two runs that meet
    if (ka < a.rank && kb < b.rank && a.s[ka] == b.s[kb]) {
      // Slice i of a against slice j of b depends only on j - i: try each shift d whose
      // pieces' extents meet, instead of every (i, j) pair.
      const Addr st = a.s[ka], ea = a.ext[ka + 1], eb = b.ext[kb + 1];
      const Addr lo = std::max<Addr>(floor_div(pa - pb - eb, st) + 1, -(a.n[ka] - 1));
      const Addr hi = std::min<Addr>(floor_div(pa + ea - pb - 1, st), b.n[kb] - 1);
      for (Addr d = lo; d <= hi; ++d) {
        const Overlap r = run(ka + 1, pa, kb + 1, pb + d * st);
        if (r != Overlap::kDisjoint) return r;
      }
      return Overlap::kDisjoint;
    }
    // Split the piece with the coarser outer step: fewer of its slices reach the other.
    const bool split_a = kb == b.rank || (ka < a.rank && a.s[ka] > b.s[kb]);
    if (split_a) return split(a, ka, pa, b_end, pb, [&](Addr p) { return run(ka + 1, p, kb, pb); });
    return split(b, kb, pb, a_end, pa, [&](Addr p) { return run(ka, pa, kb + 1, p); });
  }

  // Runs `sub` on each slice of v's dimension k (at base p) whose extent meets [o_lo, o_end).
  template <class Sub>
  Overlap split(const Norm& v, int k, Addr p, Addr o_end, Addr o_lo, Sub sub) {
    const Addr st = v.s[k], e = v.ext[k + 1];
    const Addr lo = std::max<Addr>(floor_div(o_lo - p - e, st) + 1, 0);
    const Addr hi = std::min<Addr>(floor_div(o_end - 1 - p, st), v.n[k] - 1);
    for (Addr i = lo; i <= hi; ++i) {
      const Overlap r = sub(p + i * st);
      if (r != Overlap::kDisjoint) return r;
    }
    return Overlap::kDisjoint;
  }
};

}  // namespace

ByteSet byte_set(const TensorRef& t) {
  ByteSet v;
  v.base = reinterpret_cast<uintptr_t>(t.data);
  v.rank = 4;
  for (int k = 0; k < 4; ++k) {
    v.size[k] = t.shape[k];
    v.stride[k] = t.stride[k] * 2;
  }
  v.block = 2;
  return v;
}

Overlap overlap(const ByteSet& a, const ByteSet& b) {
  Norm na, nb;
  if (!normalize(a, &na) || !normalize(b, &nb)) return Overlap::kDisjoint;
  OverlapSearch search{na, nb};
  return search.run(0, na.base, 0, nb.base);
}

Overlap self_overlap(const ByteSet& v) {
  std::pair<int64_t, int64_t> dims[4];  // (stride, size), outermost first
  int r = 0;
  for (int k = 0; k < v.rank; ++k) {
    if (v.size[k] <= 0 || v.block <= 0) return Overlap::kDisjoint;
    if (v.size[k] > 1) dims[r++] = {v.stride[k], v.size[k]};
  }
  sort_outer_first(dims, r);
  // Two distinct indices first differ in some dimension k: they meet iff the sub-view below k
  // meets a copy of itself moved by d steps of k, for some 1 <= d < size.
  int budget = 1024;  // shifts; each is a bounded overlap() of its own
  for (int k = 0; k < r; ++k) {
    if (dims[k].first == 0) return Overlap::kOverlap;
    ByteSet w;
    w.base = v.base;
    w.block = v.block;
    Addr ext = v.block;
    for (int j = k + 1; j < r; ++j) {
      w.size[w.rank] = dims[j].second;
      w.stride[w.rank++] = dims[j].first;
      ext += Addr(dims[j].second - 1) * dims[j].first;
    }
    const Addr d_max = std::min<Addr>((ext - 1) / dims[k].first, dims[k].second - 1);
    for (Addr d = 1; d <= d_max; ++d) {
      if (--budget < 0) return Overlap::kUnknown;
      ByteSet moved = w;
      moved.base += static_cast<uintptr_t>(d * dims[k].first);
      const Overlap o = overlap(w, moved);
      if (o != Overlap::kDisjoint) return o;
    }
  }
  return Overlap::kDisjoint;
}

// ---- Backward ----

Status validate_and_convert(const BackwardArgs& a, BwdParams* p, bool* empty_out) {
  // q, k, v, out: exactly the forward's rules (and its scale, GQA and dims in `fp`). lse is
  // checked below: the forward's is optional, the backward's is not.
  ForwardArgs fa;
  fa.q = a.q;
  fa.k = a.k;
  fa.v = a.v;
  fa.out = a.out;
  fa.softmax_scale = a.softmax_scale;
  fa.causal = a.causal;
  fa.backend = a.backend;
  fa.window_left = a.window_left;
  fa.window_right = a.window_right;
  fa.softcap = a.softcap;
  fa.alibi_slopes = a.alibi_slopes;
  fa.alibi_batch_stride = a.alibi_batch_stride;
  // Varlen: the forward's rules for the offsets and the packed views (dim 0 == 1), so the
  // "like" checks below make dout/dq/dk/dv packed too.
  fa.cu_seqlens_q = a.cu_seqlens_q;
  fa.cu_seqlens_k = a.cu_seqlens_k;
  fa.num_seqs = a.num_seqs;
  fa.max_seqlen_q = a.max_seqlen_q;
  fa.max_seqlen_k = a.max_seqlen_k;
  FwdParams fp;
  bool empty = false;
  Status s = validate_and_convert(fa, &fp, &empty);
  if (!s.ok()) return s;
  if (a.zero_outside_rows && a.cu_seqlens_q == nullptr)
    return invalid("zero_outside_rows: set on a dense call (it is for varlen calls, cu_seqlens_q set)");
  // A varlen call whose sequences have no keys at all (max_seqlen_k 0) computes nothing either:
  // its dq rows are 0 (backward() zeroes the rows inside sequences, as for every empty varlen
  // call). The forward has no such case: it still writes out 0 and lse -inf.
  if (fp.varlen() && !empty && fp.sk == 0) empty = true;

  struct Like {
    const TensorRef* t;
    const char* name;
    const TensorRef* ref;
    const char* ref_name;
  };
  const Like like[] = {{&a.dout, "dout", &a.out, "out"},
                       {&a.dq, "dq", &a.q, "q"},
                       {&a.dk, "dk", &a.k, "k"},
                       {&a.dv, "dv", &a.v, "v"}};
  for (const Like& l : like) {
    if (!(s = check_dtype16(*l.t, l.name)).ok()) return s;
    if (l.t->dtype != l.ref->dtype)
      return invalid(std::string(l.name) + ": dtype " + dtype_name(l.t->dtype) + " differs from " +
                     l.ref_name + "'s " + dtype_name(l.ref->dtype));
    if (!(s = check_tensor_layout(*l.t, l.name, /*empty=*/true)).ok()) return s;
    for (int i = 0; i < 4; ++i)
      if (l.t->shape[i] != l.ref->shape[i])
        return invalid(std::string(l.name) + ": shape " + shape_str(*l.t) + " differs from " +
                       l.ref_name + "'s " + shape_str(*l.ref));
  }

  // An empty call reads nothing, so only the gradients it zero-fills need real layouts.
  for (const Like& l : like) {
    const bool written = l.t != &a.dout && has_elements(*l.t);
    if (!empty || written)
      if (!(s = check_tensor_layout(*l.t, l.name, /*empty=*/false)).ok()) return s;
  }
  int64_t lse_elems = 0;  // only read when the call is not empty (then the forward's check
                          // has bounded B * Hq * Sq * 4 by int64)
  if (!empty) {
    lse_elems = a.q.shape[0] * a.q.shape[2] * a.q.shape[1];
    if (a.lse == nullptr) return invalid("lse: null pointer");
    if (reinterpret_cast<uintptr_t>(a.lse) % alignof(float) != 0)
      return invalid("lse: pointer is not 4-byte aligned");
  }

  // A gradient written over an input corrupts what other blocks still read; two gradients
  // over each other race. Inputs may share memory (packed qkv): they are only read.
  struct Named {
    ByteSet bytes;
    const char* name;
  };
  ByteSet lse_bytes;
  lse_bytes.base = reinterpret_cast<uintptr_t>(a.lse);
  lse_bytes.block = lse_elems * static_cast<int64_t>(sizeof(float));
  const Named inputs[] = {{byte_set(a.dout), "dout"}, {byte_set(a.q), "q"}, {byte_set(a.k), "k"},
                          {byte_set(a.v), "v"},       {byte_set(a.out), "out"}, {lse_bytes, "lse"}};
  const Named grads[] = {{byte_set(a.dq), "dq"}, {byte_set(a.dk), "dk"}, {byte_set(a.dv), "dv"}};
  const TensorRef* grad_refs[] = {&a.dq, &a.dk, &a.dv};
  auto check = [](const Named& g, const Named& other) -> Status {
    switch (overlap(g.bytes, other.bytes)) {
      case Overlap::kDisjoint: return Status::Ok();
      case Overlap::kOverlap: return invalid(std::string(g.name) + ": overlaps " + other.name);
      case Overlap::kUnknown:
        return invalid(std::string(g.name) + ": may overlap " + other.name +
                       " (their strides interleave too finely to prove them disjoint)");
    }
    return Status::Ok();
  };
  for (int g = 0; g < 3; ++g) {
    // Two elements of one gradient on the same bytes: writers race (stride 0, or a stride
    // smaller than what it steps over).
    switch (self_overlap(grads[g].bytes)) {
      case Overlap::kDisjoint: break;
      case Overlap::kOverlap:
        return invalid(std::string(grads[g].name) + ": elements overlap each other (strides " +
                       stride_str(*grad_refs[g]) + ")");
      case Overlap::kUnknown:
        return invalid(std::string(grads[g].name) + ": elements may overlap each other (strides " +
                       stride_str(*grad_refs[g]) + " interleave too finely to prove otherwise)");
    }
    if (!empty)
      for (const Named& in : inputs)
        if (!(s = check(grads[g], in)).ok()) return s;
    for (int h = 0; h < g; ++h)
      if (!(s = check(grads[g], grads[h])).ok()) return s;
  }

  if (empty_out) *empty_out = empty;
  if (p == nullptr || empty) return Status::Ok();
  BwdParams& r = *p;
  r = BwdParams{};
  static_cast<AttnParams&>(r) = fp;
  r.dout = {a.dout.data, a.dout.stride[0], a.dout.stride[1], a.dout.stride[2]};
  r.o = {a.out.data, a.out.stride[0], a.out.stride[1], a.out.stride[2]};
  r.lse = a.lse;
  r.dq = {a.dq.data, a.dq.stride[0], a.dq.stride[1], a.dq.stride[2]};
  r.dk = {a.dk.data, a.dk.stride[0], a.dk.stride[1], a.dk.stride[2]};
  r.dv = {a.dv.data, a.dv.stride[0], a.dv.stride[1], a.dv.stride[2]};
  r.deterministic = a.deterministic;
  r.cu_q = fp.cu_q;
  r.cu_k = fp.cu_k;
  r.total_q = fp.total_q;
  r.total_k = fp.total_k;
  return Status::Ok();
}

}  // namespace flashattn::detail
