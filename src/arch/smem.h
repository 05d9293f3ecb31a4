// Shared-memory addressing: the one place that turns a generic pointer into the 32-bit
// shared-window address that mbarrier, TMA, wgmma descriptors, ldmatrix and cp.async take.
#pragma once
#include <cstdint>

namespace flashattn::arch {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace flashattn::arch
