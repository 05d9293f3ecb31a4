// ldmatrix wrappers (sm_75+): warp-wide loads of 8x8 b16 matrices from shared memory, and
// stmatrix (sm_90+), the store the other way.
// Lane l supplies the row address (16 B, 16-B aligned) of row l%8 of matrix l/8; each lane
// receives (stores), per matrix, the b16 pair at (row lane/4, cols 2*(lane%4)..+1) (transposed
// for .trans).
#pragma once

#include <cstdint>

#include "arch/smem.h"

namespace flashattn::arch {

// Four 8x8 matrices; r[i] is this lane's fragment of matrix i. smem_addr: shared-window address.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Four 8x8 matrices, each transposed on the way (for row-major B operands such as V).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// Four 8x8 matrices from registers: r[i] is this lane's fragment of matrix i (the layout of an
// mma / wgmma accumulator pair packed to b16), each row written as 16 contiguous bytes at the
// address its lane supplies. One instruction where per-lane 32-bit stores take sixteen.
__device__ __forceinline__ void stmatrix_x4(uint32_t smem_addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}
#endif

}  // namespace flashattn::arch
