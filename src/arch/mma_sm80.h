// mma.sync wrappers (sm_80+): warp-wide m16n8k16 tensor-core MMA with fp32 accumulation.
// Fragment layouts are the PTX ISA's (see "Matrix Fragments for mma.m16n8k16"):
//   A (16x16, row): a[0]=(r, k0..1) a[1]=(r+8, k0..1) a[2]=(r, k8..9) a[3]=(r+8, k8..9)
//   B (16x8, col):  b[0]=(k0..1, n)  b[1]=(k8..9, n)
//   C (16x8 fp32):  c[0..1]=(r, 2q..2q+1)  c[2..3]=(r+8, 2q..2q+1)
// with r = lane/4, q = lane%4, n = lane/4, k0 = 2*(lane%4).
#pragma once

#include <cstdint>

namespace flashattn::arch {

// D = A*B + D; A, B packed fp16x2.
__device__ __forceinline__ void mma_m16n8k16_f32_f16(float (&d)[4], const uint32_t (&a)[4],
                                                     const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A*B + D; A, B packed bf16x2.
__device__ __forceinline__ void mma_m16n8k16_f32_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                      const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Dispatch on the element type (true = bf16).
template <bool kBf16>
__device__ __forceinline__ void mma_m16n8k16_f32(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2]) {
  if constexpr (kBf16) {
    mma_m16n8k16_f32_bf16(d, a, b);
  } else {
    mma_m16n8k16_f32_f16(d, a, b);
  }
}

}  // namespace flashattn::arch
