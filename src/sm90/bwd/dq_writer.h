// The backward's dQ writer: one thread (warp 1 of the load warpgroup) adds each query block's
// staged dQ into the fp32 accumulator with one bulk reduce-add, so the MMA warpgroups never wait
// on a reduction (they only wait for the staging to have been read, long done by then).
// Deterministic mode: key blocks add into a (batch, head, query block) in a fixed order (`turn`
// is the block's place in it: ascending key blocks, or under causal descending, or under a
// window ascending from the query block's first key block; see kernel.h).
// Each waits for the counter to reach its turn, and advances it only after its own reduction
// has completed in global memory (wait_group 0), not merely read its staging: the next block's
// reduction must land on a finished sum.
#pragma once

#include <cuda/atomic>

#include <cstdint>

#include "arch/mbarrier.h"
#include "arch/tma.h"
#include "sm90/bwd/kernel_args.h"
#include "sm90/pipeline.h"

namespace flashattn::sm90 {

// turn_at: the block's counter in args.dq_turn; -1 (the dense kernels): `chunk`'s own (varlen
// counts turns per (sequence, head, query block), bwd/varlen.h).
template <class Cfg>
__device__ __forceinline__ void dq_writer_block(MbarRing<1>& dq, uint32_t phase, uint32_t staging,
                                                const Sm90BwdArgs& args, int64_t chunk, int turn_of_block,
                                                int turn_at = -1) {
  dq.wait_full(0, phase);
  float* dst = args.dq_accum + chunk * (Cfg::kBlockM * Cfg::kHeadDim);
  if (args.dq_turn == nullptr) {
    arch::bulk_reduce_add_f32(dst, staging, Cfg::kDqBytes);
    arch::cp_async_bulk_commit_group();
    arch::cp_async_bulk_wait_group_read0();
    arch::mbarrier_arrive(dq.empty_bar(0));
    return;
  }
  cuda::atomic_ref<int, cuda::thread_scope_device> turn(args.dq_turn[turn_at < 0 ? chunk : turn_at]);
  while (turn.load(cuda::memory_order_acquire) != turn_of_block) {
  }
  arch::fence_proxy_async_global();  // the acquire before this thread's async-proxy reduction
  arch::bulk_reduce_add_f32(dst, staging, Cfg::kDqBytes);
  arch::cp_async_bulk_commit_group();
  arch::cp_async_bulk_wait_group_read0();
  arch::mbarrier_arrive(dq.empty_bar(0));
  arch::cp_async_bulk_wait_group0();
  arch::fence_proxy_async_global();
  turn.store(turn_of_block + 1, cuda::memory_order_release);
}

// kDqInStage: the two groups' dQ sit over stage `st`'s Q and dO tiles (mainloop.h), in the
// accumulator's order (BwdConfig::dq_element): two bulk reductions; once they have been read
// the stage goes back to the loader.
template <class Cfg>
__device__ __forceinline__ void dq_writer_block_in_stage(MbarRing<Cfg::kStages>& dq, MbarRing<Cfg::kStages>& ring,
                                                         const PipelineState<Cfg::kStages>& st, uint32_t smem,
                                                         const Sm90BwdArgs& args, int64_t chunk, int turn_of_block,
                                                         int turn_at = -1) {
  dq.wait_full(st.stage, st.phase);
  float* dst = args.dq_accum + chunk * (Cfg::kBlockM * Cfg::kHeadDim);
  if (args.dq_turn != nullptr) {  // deterministic: as dq_writer_block
    cuda::atomic_ref<int, cuda::thread_scope_device> turn(args.dq_turn[turn_at < 0 ? chunk : turn_at]);
    while (turn.load(cuda::memory_order_acquire) != turn_of_block) {
    }
    arch::fence_proxy_async_global();
  }
  const uint32_t stage = st.stage * Cfg::kQBytes;
  arch::bulk_reduce_add_f32(dst, smem + Cfg::kSmemQ + stage, Cfg::kQBytes);
  arch::bulk_reduce_add_f32(dst + Cfg::kQBytes / 4, smem + Cfg::kSmemDo + stage, Cfg::kQBytes);
  arch::cp_async_bulk_commit_group();
  arch::cp_async_bulk_wait_group_read0();
  arch::mbarrier_arrive(ring.empty_bar(st.stage));
  if (args.dq_turn != nullptr) {
    arch::cp_async_bulk_wait_group0();
    arch::fence_proxy_async_global();
    cuda::atomic_ref<int, cuda::thread_scope_device> turn(args.dq_turn[turn_at < 0 ? chunk : turn_at]);
    turn.store(turn_of_block + 1, cuda::memory_order_release);
  }
}

}  // namespace flashattn::sm90
