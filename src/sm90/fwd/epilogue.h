// Epilogue: O / rowsum in q's dtype, lse in fp32. Rows >= Sq are never written. Offsets are 64-bit.
// Two ways to write O: straight from the accumulator registers (4-byte stores), or
// (kTmaStoreEpilogue) staged in swizzled smem and written by one TMA store per box of columns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "arch/convert.h"
#include "arch/mbarrier.h"
#include "arch/named_barrier.h"
#include "arch/tma.h"
#include "sm90/fwd/mainloop.h"
#include "sm90/fwd/kernel_args.h"

namespace flashattn::sm90 {

template <class Cfg>
__device__ __forceinline__ void epilogue_store(const Sm90FwdArgs& args, float (&rO)[Cfg::kORegs],
                                               typename Consumer<Cfg>::Softmax& sm, int b, int h, int row0,
                                               int q_off = 0, int seq_sq = 0) {
  float inv[2], lse[2];
  sm.finalize(inv, lse);
  const int q = threadIdx.x & 3;
  using Elem = std::conditional_t<Cfg::kBf16, __nv_bfloat16, __half>;
  Elem* o = static_cast<Elem*>(args.o) + static_cast<int64_t>(b) * args.o_sb + static_cast<int64_t>(h) * args.o_sh;
  // Varlen: the sequence's rows start at packed row q_off (b is 0), lse is (Hq, total_q).
  if constexpr (Cfg::kVarlen) o += static_cast<int64_t>(q_off) * args.o_ss;
  const int sq = Cfg::kVarlen ? seq_sq : args.sq;
  const int64_t lse_row0 = Cfg::kVarlen ? static_cast<int64_t>(h) * args.total_q + q_off
                                        : (static_cast<int64_t>(b) * args.hq + h) * args.sq;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    if (row >= sq) continue;
    Elem* orow = o + static_cast<int64_t>(row) * args.o_ss + 2 * q;
#pragma unroll
    for (int c = 0; c < Cfg::kORegs / 4; ++c) {
      const int i = 4 * c + 2 * r;  // elements i, i+1: columns 8c + 2q, +1 (dv is even: both or neither)
      if (8 * c + 2 * q < args.d_v)
        *reinterpret_cast<uint32_t*>(orow + 8 * c) = arch::pack_f32x2<Cfg::kBf16>(rO[i] * inv[r], rO[i + 1] * inv[r]);
    }
    if (args.lse != nullptr && q == 0) args.lse[lse_row0 + row] = lse[r];
  }
}

// Barrier over one consumer warpgroup's 128 threads (ids must be immediates).
template <class Cfg>
__device__ __forceinline__ void epilogue_wg_sync(int wg) {
  if (wg == 0) arch::named_barrier_sync<kBarEpilogueWg0, 128>();
  else if (Cfg::kNumConsumerWarpgroups == 2 || wg == 1) arch::named_barrier_sync<kBarEpilogueWg0 + 1, 128>();
  else if constexpr (Cfg::kNumConsumerWarpgroups == 3) arch::named_barrier_sync<kBarEpilogueWg0 + 2, 128>();
}

// TMA-store epilogue for consumer group `wg` (rows m0 + 64wg ...): each group has its own 64-row
// staging buffer (Cfg::kSmemO + wg * kOGroupBytes), so groups never wait for each other. The
// group's thread 0 issues the stores and, at the next tile's epilogue (or exit), waits until
// they have read the buffer before anyone overwrites it.
// kTmaStoreInQ: `q_slot` is the tile's Q slot, staged over and released here; the group's
// q_empty arrivals (one per warp) come after the write (warps 1-3) and after the store has read
// the slot (warp 0, whose thread 0 issued it).
template <class Cfg>
__device__ __forceinline__ void epilogue_store_tma(const void* tmO, uint32_t smem, FwdBarriers<Cfg>& bars,
                                                   uint32_t q_slot, const Sm90FwdArgs& args, float (&rO)[Cfg::kORegs],
                                                   typename Consumer<Cfg>::Softmax& sm, int b, int h, int m0, int wg,
                                                   int q_off = 0) {
  // Varlen: only tiles whose rows all belong to the sequence come here (the store would
  // otherwise write the next sequence's rows); they start at packed row q_off, b is 0.
  float inv[2], lse[2];
  sm.finalize(inv, lse);
  const int t = threadIdx.x % 128, q = t & 3;
  const uint32_t buf = smem + (Cfg::kTmaStoreInQ ? Cfg::kSmemQ + q_slot * Cfg::kQBytes : Cfg::kSmemO) +
                       wg * Cfg::kOGroupStride;
  // Own buffer: the previous tile's store must have read it. In Q: every warp's share of the
  // group's last QK^T has retired (the group's wgmmas read all 64 rows).
  if (!Cfg::kTmaStoreInQ && t == 0) arch::cp_async_bulk_wait_group_read0();
  epilogue_wg_sync<Cfg>(wg);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int rl = 16 * (t / 32) + (t % 32) / 4 + 8 * r;  // row inside the group's 64
    // Columns 8c + 2q, +1: 16-byte chunk c % kChunks of box c / kChunks. The TMA swizzle XORs a
    // row's chunk index with its byte offset's 128 B line (bits 7+): rl % 8 for 128 B rows,
    // (rl / 2) % 4 for 64 B rows. Either way the 32 lanes hit 32 distinct banks.
    constexpr int kChunks = Cfg::kSwizzleBytes / 16;
    const int line = (rl * Cfg::kSwizzleBytes / 128) % kChunks;
#pragma unroll
    for (int c = 0; c < Cfg::kORegs / 4; ++c) {
      const int i = 4 * c + 2 * r;
      const uint32_t addr = buf + (c / kChunks) * Cfg::kOBoxStride + rl * Cfg::kSwizzleBytes +
                            (((c % kChunks) ^ line) << 4) + 4 * q;
      arch::st_shared_b32(addr, arch::pack_f32x2<Cfg::kBf16>(rO[i] * inv[r], rO[i + 1] * inv[r]));
    }
  }
  arch::fence_proxy_async_shared_cta();  // generic-proxy writes -> visible to the TMA engine
  epilogue_wg_sync<Cfg>(wg);
  const int row_base = m0 + 64 * wg;
  if (t == 0 && row_base < args.sq) {
#pragma unroll
    for (int c = 0; c < Cfg::kVBoxes; ++c)
      arch::tma_store_4d(tmO, buf + c * Cfg::kOBoxStride, c * Cfg::kBoxCols, row_base + (Cfg::kVarlen ? q_off : 0), h,
                         b);  // rows >= Sq clipped
    arch::cp_async_bulk_commit_group();
  }
  if constexpr (Cfg::kTmaStoreInQ) {
    if (t == 0) arch::cp_async_bulk_wait_group_read0();
    bars.q.release_warp(q_slot);
  }
  if (args.lse != nullptr && q == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_base + 16 * (t / 32) + (t % 32) / 4 + 8 * r;
      if constexpr (Cfg::kVarlen)
        args.lse[static_cast<int64_t>(h) * args.total_q + q_off + row] = lse[r];
      else if (row < args.sq)
        args.lse[(static_cast<int64_t>(b) * args.hq + h) * args.sq + row] = lse[r];
    }
  }
}

}  // namespace flashattn::sm90
