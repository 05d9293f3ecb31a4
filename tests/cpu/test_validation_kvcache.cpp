// The KV-cache call's validation (api/kvcache.cpp): each bad argument named, nothing launched
// (no GPU here: a launch attempt would surface as a device error instead); good calls convert
// into the KvCacheParams the decode kernels read.
#include <gtest/gtest.h>

#include <string>

#include "api/validate.h"
#include "flashattn/flashattn.h"
#include "flashattn/flashattn_c.h"

using namespace flashattn;

namespace {

// Distinct, 16-byte aligned, never dereferenced: the overlap check sees separate tensors.
alignas(64) char g_mem[1 << 22];
alignas(16) int32_t g_i32[64];

void* at(size_t mb_offset) { return g_mem + mb_offset * 65536; }

// B=2, Sq=1, Hq=8, Hkv=2, D=64, contiguous cache of 256 keys.
KvCacheArgs good(bool paged = false, bool with_new = true) {
  KvCacheArgs a;
  a.q = make_contiguous(at(0), DType::kBFloat16, 2, 1, 8, 64);
  if (paged) {
    a.k_cache = make_contiguous(at(1), DType::kBFloat16, 10, 16, 2, 64);
    a.v_cache = make_contiguous(at(3), DType::kBFloat16, 10, 16, 2, 64);
    a.block_table = g_i32;
    a.max_pages = 4;
  } else {
    a.k_cache = make_contiguous(at(1), DType::kBFloat16, 2, 256, 2, 64);
    a.v_cache = make_contiguous(at(3), DType::kBFloat16, 2, 256, 2, 64);
  }
  if (with_new) {
    a.k_new = make_contiguous(at(5), DType::kBFloat16, 2, 3, 2, 64);
    a.v_new = make_contiguous(at(6), DType::kBFloat16, 2, 3, 2, 64);
  }
  a.out = make_contiguous(at(7), DType::kBFloat16, 2, 1, 8, 64);
  a.cache_seqlens = g_i32;
  return a;
}

void expect_invalid(const KvCacheArgs& a, const char* needle) {
  const Status s = validate(a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message();
  EXPECT_EQ(forward_kvcache(a).code(), StatusCode::kInvalidArgument);
}

}  // namespace

TEST(ValidationKvCache, GoodCallsConvert) {
  for (bool paged : {false, true}) {
    detail::KvCacheParams p;
    bool empty = true;
    const Status s = detail::validate_and_convert(good(paged), &p, &empty);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_FALSE(empty);
    EXPECT_EQ(p.b, 2);
    EXPECT_EQ(p.hq, 8);
    EXPECT_EQ(p.hkv, 2);
    EXPECT_EQ(p.h_ratio, 4);
    EXPECT_EQ(p.s_new, 3);
    EXPECT_EQ(p.paged(), paged);
    EXPECT_EQ(p.sk, paged ? 64 : 256);  // capacity: max_pages * page_size or S_cache
    if (paged) {
      EXPECT_EQ(p.page_size, 16);
      EXPECT_EQ(p.num_pages, 10);
      EXPECT_EQ(p.block_table_stride, 4);  // 0 means max_pages
    }
  }
  EXPECT_TRUE(validate(good(false, false)).ok());
}

TEST(ValidationKvCache, BadArgumentsAreNamed) {
  KvCacheArgs a = good();
  a.k_cache.shape[3] = 32;
  expect_invalid(a, "k_cache: head dim");
  a = good();
  a.v_cache.shape[1] = 128;
  expect_invalid(a, "v_cache: shape");
  a = good();
  a.k_cache.shape[0] = a.v_cache.shape[0] = 3;
  expect_invalid(a, "k_cache: batch 3");
  a = good();
  a.out.shape[3] = 32;
  expect_invalid(a, "out: shape");
  a = good();
  a.v_new.data = nullptr;
  expect_invalid(a, "v_new: null");
  a = good();
  a.k_new.shape[2] = 4;
  expect_invalid(a, "k_new: shape");
  a = good();
  a.v_new.dtype = DType::kFloat16;
  expect_invalid(a, "v_new: dtype");
  a = good();
  a.num_splits = -1;
  expect_invalid(a, "num_splits");
  a = good();
  a.cache_seqlens = nullptr;
  a.cache_seqlen = 254;  // + 3 new keys > 256
  expect_invalid(a, "cache_seqlen: 254");
  a = good();
  a.cache_seqlens = nullptr;
  a.cache_seqlen = -1;
  expect_invalid(a, "cache_seqlen: negative");
  a = good();
  a.q.shape[2] = 6;
  a.out.shape[2] = 6;
  a.q.stride[1] = 6 * 64;
  a.out.stride[1] = 6 * 64;
  a.k_cache.shape[2] = a.v_cache.shape[2] = 4;
  a.k_new.shape[2] = a.v_new.shape[2] = 4;
  expect_invalid(a, "k_cache: heads 4 must divide");
  a = good(true);
  a.k_cache.shape[1] = a.v_cache.shape[1] = 24;
  expect_invalid(a, "page size (dim 1) 24");
  a = good(true);
  a.max_pages = 0;
  expect_invalid(a, "max_pages");
  a = good(true);
  a.block_table_stride = 2;
  expect_invalid(a, "block_table_stride");
  a = good();
  a.max_pages = 3;
  expect_invalid(a, "set without a block_table");
  a = good();
  a.out = a.q;  // out written over q
  a.out.shape[3] = 64;
  expect_invalid(a, "out: shares memory with q");
  a = good();
  a.k_new.data = a.k_cache.data;
  expect_invalid(a, "k_new: shares memory with k_cache");
  a = good();
  a.window_left = -3;
  expect_invalid(a, "window_left: -3");
  a = good();
  a.softcap = -2.f;
  expect_invalid(a, "softcap");
  a = good();
  a.alibi_slopes = reinterpret_cast<const float*>(g_i32);
  a.alibi_batch_stride = 5;
  expect_invalid(a, "alibi_batch_stride");
  a = good();
  a.q.shape[3] = 60;
  a.k_cache.shape[3] = a.k_new.shape[3] = 60;
  expect_invalid(a, "q: head dim 60");
}

TEST(ValidationKvCache, ReferenceBackendIsRefusedByName) {
  KvCacheArgs a = good();
  a.backend = Backend::kReference;
  const Status s = validate(a);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("backend reference"), std::string::npos) << s.message();
}

TEST(ValidationKvCache, EmptyCallsLaunchNothing) {
  KvCacheArgs a = good();
  a.q.shape[0] = a.out.shape[0] = a.k_cache.shape[0] = a.v_cache.shape[0] = 0;
  a.k_new.shape[0] = a.v_new.shape[0] = 0;
  bool empty = false;
  ASSERT_TRUE(detail::validate_and_convert(a, nullptr, &empty).ok());
  EXPECT_TRUE(empty);
  EXPECT_TRUE(forward_kvcache(a).ok());
}

TEST(CApiKvCache, SizeRuleAndFields) {
  EXPECT_EQ(flashattn_kvcache_params_size(), sizeof(flashattn_kvcache_params_t));
  EXPECT_EQ(FLASHATTN_KVCACHE_PARAMS_SIZE_V2, sizeof(flashattn_kvcache_params_t));
  EXPECT_LT(FLASHATTN_KVCACHE_PARAMS_SIZE_V1, FLASHATTN_KVCACHE_PARAMS_SIZE_V2);
  flashattn_kvcache_params_t p;
  flashattn_kvcache_params_init(&p);
  EXPECT_EQ(flashattn_kvcache_ex(nullptr, nullptr), FLASHATTN_INVALID_ARGUMENT);
  p.struct_size = 8;
  EXPECT_EQ(flashattn_kvcache_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashattn_last_error()).find("params.struct_size"), std::string::npos);
  // A real call's fields reach validation: a bad page size is named.
  flashattn_kvcache_params_init(&p);
  const KvCacheArgs a = good(true, false);
  auto to_c = [](const TensorRef& t) {
    flashattn_tensor_t c{};
    c.data = t.data;
    c.dtype = static_cast<int32_t>(t.dtype);
    for (int i = 0; i < 4; ++i) c.shape[i] = t.shape[i], c.stride[i] = t.stride[i];
    return c;
  };
  p.q = to_c(a.q);
  p.k_cache = to_c(a.k_cache);
  p.v_cache = to_c(a.v_cache);
  p.out = to_c(a.out);
  p.block_table = a.block_table;
  p.max_pages = 4;
  p.k_cache.shape[1] = p.v_cache.shape[1] = 40;
  EXPECT_EQ(flashattn_kvcache_ex(&p, nullptr), FLASHATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashattn_last_error()).find("page size (dim 1) 40"), std::string::npos)
      << flashattn_last_error();
}
