"""Context parallelism: ring attention across GPUs (torch.distributed / NCCL), forward and
backward.

Each rank holds a shard of the sequence, (batch, seqlen / world, heads, headdim). The K/V shards
travel around the ring (rank r sends to r+1 and receives from r-1) while every rank runs the
library's forward kernel on the K/V block it holds; the partial results are merged with their
log-sum-exp. After `world` steps every rank holds exact attention for its queries over the
whole sequence.

    import torch.distributed as dist
    from flashattn.distributed import ring_flash_attn_func, zigzag_shard, zigzag_unshard
    # q, k, v: the full (B, S, H, D) tensors, identical on every rank (or build shards directly)
    r, w = dist.get_rank(), dist.get_world_size()
    ql, kl, vl = (zigzag_shard(t, w, r) for t in (q, k, v))            # causal: zigzag
    out_local = ring_flash_attn_func(ql, kl, vl, causal=True)
    out_local.backward(grad_local)  # training (ql, kl, vl require grad): on every rank

Sharding
--------
* causal=True: zigzag (load balanced). The sequence is cut into 2*world chunks of equal length
  and rank r holds chunks r and 2*world-1-r (`zigzag_shard` / `zigzag_unshard`). Every
  (q-chunk, k-chunk) pair is then fully visible, diagonal or fully masked; fully masked blocks
  are skipped, so each rank computes the same amount: at step 0 one causal call on its own
  2 chunks, and at every later step one non-causal call of half the size (all local queries
  against the first chunk of the block, or the second local chunk against the whole block).
  The sequence length must be divisible by 2*world (ValueError otherwise), and q and k/v must
  have the same length (self attention: bottom-right == top-left alignment).
* causal=False: contiguous shards (`ring_shard` / `ring_unshard`). Any length is accepted:
  shards are ceil(S / world) long and the last one(s) are shorter (possibly empty when
  S < world * ceil(S / world)); shard lengths may differ from rank to rank, and q and k/v may
  have different lengths. Every rank learns the K/V shard lengths once per call (a small
  all-gather) so that it can size its receive buffers.

Backward
--------
When q, k or v requires grad, the call records an autograd node (every rank must then run the
backward, as with any collective). The forward saves the local q, k, v shards and this rank's
merged out and lse. The backward (`_ring_rank_bwd_steps`) walks the same ring with the same
step pattern as the forward: at each step one library backward call on the block in hand
(flash_attn_backward; zigzag: step 0 causal on the own chunks, later steps non-causal on half
the data, fully masked pairs skipped), given the GLOBAL out and lse of the queries involved
(sliced along the sequence): it then recomputes the block's probabilities exactly and uses the
whole row's rowsum(dout * out), so its (dq, dk, dv) are the block's exact share of the full
gradients. dQ accumulates locally. The K/V blocks travel as in the forward (the next block's
transfer posted before the block's backward, so it overlaps it) and each block's dK/dV
accumulator travels with it, one exchange behind: rank r adds its queries' share to the
accumulator of the block it holds (received from r-1) and sends it on to r+1; after the last
step each accumulator makes one more hop, back to the block's owner (dK/dV make `world` hops,
K/V `world - 1`). dQ, dK and dV accumulate in fp32 (fp64 for fp64 inputs) and are cast to the
inputs' dtypes at the end. The accumulator exchange of step s is waited for in step s + 1,
after that step's backward call (so it overlaps that call too), but before the share is
added; the accumulators are fp32, twice the bytes of the bf16/fp16 K/V blocks. The gradient
flows through out only: a loss that uses the returned lse raises NotImplementedError in the
backward. Without grad (torch.no_grad() or inputs that do not require it) the call is the
plain forward, nothing saved.

Transports
----------
The per-rank algorithm (`_ring_rank_steps`, `_ring_rank_bwd_steps`) is the same code for every
transport. A transport has `rank`, `world_size`, `all_seqlens(n) -> list[int]`,
`send_recv_kv(k, v, recv_seqlen) -> (k_next, v_next)` that *starts* sending this rank's block
to the next rank and receiving the previous rank's block into the returned buffers, and
`wait()` after which those buffers may be read; for the backward, `send_recv_grads(dk, dv,
recv_seqlen) -> (dk_next, dv_next)` and `wait_grads()`, the same for the fp32 dK/dV
accumulators on a channel of their own (one K/V and one dK/dV exchange may be pending at once).

* `NcclTransport` (default): torch.distributed point-to-point ops (dist.batch_isend_irecv)
  issued on a side stream, overlapped with the kernel on the block in hand; `wait()` and
  `wait_grads()` order the compute stream after the transfer (the host never blocks). Every
  rank posts its exchanges in the same order, so the point-to-point ops match.
* `LocalTransport`: all ranks in one process on one device, in lockstep, the transfers being
  device copies. `local_ring_flash_attn_func` / `simulate_ring_flash_attn` drive it, forward
  and backward; it exists to test the whole algorithm on one GPU (or on the CPU with reference
  attention functions: attn_fn for the forward, attn_bwd_fn for the per-block backward).

Modules: _dist_sharding (zigzag / contiguous shards), _dist_merge (merge_attn_states),
_dist_transports (NcclTransport, LocalRing, LocalTransport), _dist_ring (the per-rank steps
forward and backward, the autograd Functions and the front ends). This module re-exports their
names.
"""
from ._dist_merge import _merge_into, merge_attn_states  # noqa: F401
from ._dist_ring import (  # noqa: F401
    AttnBwdFn, AttnFn, _check_shapes, _default_attn, _default_attn_bwd, _ring_rank_bwd_steps,
    _ring_rank_steps, _run_to_end, local_ring_flash_attn_func, ring_flash_attn_func,
    simulate_ring_flash_attn)
from ._dist_sharding import (  # noqa: F401
    _check_world_rank, _norm_dim, ring_shard, ring_shard_lengths, ring_unshard, zigzag_shard,
    zigzag_unshard)
from ._dist_transports import LocalRing, LocalTransport, NcclTransport, _peer  # noqa: F401

__all__ = [
    "ring_flash_attn_func", "local_ring_flash_attn_func", "simulate_ring_flash_attn",
    "merge_attn_states", "zigzag_shard", "zigzag_unshard", "ring_shard", "ring_unshard",
    "ring_shard_lengths", "NcclTransport", "LocalTransport", "LocalRing",
]
