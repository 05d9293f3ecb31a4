// Epilogue: O / rowsum written straight from the accumulator registers in q's dtype, lse in fp32.
// Rows >= Sq are never written. Offsets are 64-bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "sm90/consumer.h"
#include "sm90/kernel_args.h"

namespace flashattn::sm90 {

template <class Cfg>
__device__ __forceinline__ void epilogue_store(const Sm90FwdArgs& args, float (&rO)[Cfg::kORegs],
                                               OnlineSoftmax<Cfg::kSRegs>& sm, int b, int h, int row0) {
  float inv[2], lse[2];
  sm.finalize(inv, lse);
  const int q = threadIdx.x & 3;
  using Elem = std::conditional_t<Cfg::kBf16, __nv_bfloat16, __half>;
  Elem* o = static_cast<Elem*>(args.o) + static_cast<int64_t>(b) * args.o_sb + static_cast<int64_t>(h) * args.o_sh;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    if (row >= args.sq) continue;
    Elem* orow = o + static_cast<int64_t>(row) * args.o_ss + 2 * q;
#pragma unroll
    for (int c = 0; c < Cfg::kORegs / 4; ++c) {
      const int i = 4 * c + 2 * r;  // elements i, i+1: columns 8c + 2q, +1
      *reinterpret_cast<uint32_t*>(orow + 8 * c) = pack_f32x2<Cfg::kBf16>(rO[i] * inv[r], rO[i + 1] * inv[r]);
    }
    if (args.lse != nullptr && q == 0)
      args.lse[(static_cast<int64_t>(b) * args.hq + h) * args.sq + row] = lse[r];
  }
}

}  // namespace flashattn::sm90
