// TMA (cp.async.bulk.tensor) wrappers, sm_90. Tensor maps are __grid_constant__ kernel params.
#pragma once
#include <cstdint>

namespace flashattn::arch {

// Loads one 4-D box at coordinates {c0..c3} (innermost first) into smem `dst`, completing
// `bytes` of transaction count on mbarrier `bar`. Out-of-bounds elements are zero-filled.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// Stores one 4-D box from smem `src`; rows past the tensor's extent are clipped.
__device__ __forceinline__ void tma_store_4d(const void* tmap, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(tmap)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// 4-byte shared-memory store at a shared-window address (staging O for a TMA store).
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// Closes the pending bulk stores of this thread into a group.
__device__ __forceinline__ void cp_async_bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until all committed bulk groups of this thread have finished reading smem.
__device__ __forceinline__ void cp_async_bulk_wait_group_read0() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Orders this thread's generic-proxy smem writes before later async-proxy (TMA/wgmma) accesses.
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) of contiguous global memory
// into smem `dst`, completing the bytes on mbarrier `bar` (the 1-D bulk copy; no tensor map).
__device__ __forceinline__ void bulk_load_1d(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
               : "memory");
}
// Adds `bytes` (multiple of 16, 16-byte aligned) of fp32 from smem `src` into global `dst`
// element-wise, in the L2 (one bulk reduction; part of this thread's bulk group).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   reinterpret_cast<uint64_t>(dst)),
               "r"(src), "r"(bytes)
               : "memory");
}
// Waits until all committed bulk groups of this thread are complete, their global writes
// included (not only their smem reads, as the .read form waits for).
__device__ __forceinline__ void cp_async_bulk_wait_group0() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
// Orders async-proxy global accesses (bulk reductions) with this thread's generic-proxy ones.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// Hints the tensor map into the constant/descriptor cache before first use.
__device__ __forceinline__ void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

}  // namespace flashattn::arch
