// cp.async wrappers (sm_80+): asynchronous 16-B global->shared copies that bypass L1 (.cg),
// grouped with commit/wait_group.
#pragma once

#include <cstdint>

namespace flashattn::arch {

// Copies 16 B from gmem_src to smem_dst if valid, else writes 16 zero bytes and reads nothing.
// Both addresses must be 16-B aligned; gmem_src must still be a mapped address when !valid.
__device__ __forceinline__ void cp_async_cg_16_zfill(uint32_t smem_dst, const void* gmem_src,
                                                     bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}

// Copies 16 B from gmem_src to smem_dst (no source-size operand: no predicate register).
// Both addresses must be 16-B aligned.
__device__ __forceinline__ void cp_async_cg_16(uint32_t smem_dst, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_dst), "l"(gmem_src) : "memory");
}

// Closes the current group of cp.async operations issued by this thread.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace flashattn::arch
