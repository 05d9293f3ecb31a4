"""Context parallelism: ring attention forward across GPUs (torch.distributed / NCCL).

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

Transports
----------
The per-rank algorithm (`_ring_rank_steps`) is the same code for every transport. A transport
has `rank`, `world_size`, `all_seqlens(n) -> list[int]`, `send_recv_kv(k, v, recv_seqlen)
-> (k_next, v_next)` that *starts* sending this rank's block to the next rank and receiving
the previous rank's block into the returned buffers, and `wait()` after which those buffers
may be read.

* `NcclTransport` (default): torch.distributed point-to-point ops (dist.batch_isend_irecv)
  issued on a side stream, overlapped with the forward kernel on the block in hand; `wait()`
  orders the compute stream after the transfer (the host never blocks).
* `LocalTransport`: all ranks in one process on one device, in lockstep, the transfers being
  device copies. `local_ring_flash_attn_func` / `simulate_ring_flash_attn` drive it; it exists
  to test the whole algorithm on one GPU (or on the CPU with a reference attention function).

Only the forward pass is provided (the ring backward is its own issue).

Modules: _dist_sharding (zigzag / contiguous shards), _dist_merge (merge_attn_states),
_dist_transports (NcclTransport, LocalRing, LocalTransport), _dist_ring (the per-rank steps and
the front ends). This module re-exports their names.
"""
from ._dist_merge import _merge_into, merge_attn_states  # noqa: F401
from ._dist_ring import (  # noqa: F401
    AttnFn, _check_shapes, _default_attn, _ring_rank_steps, _run_to_end,
    local_ring_flash_attn_func, ring_flash_attn_func, simulate_ring_flash_attn)
from ._dist_sharding import (  # noqa: F401
    _check_world_rank, _norm_dim, ring_shard, ring_shard_lengths, ring_unshard, zigzag_shard,
    zigzag_unshard)
from ._dist_transports import LocalRing, LocalTransport, NcclTransport, _peer  # noqa: F401

__all__ = [
    "ring_flash_attn_func", "local_ring_flash_attn_func", "simulate_ring_flash_attn",
    "merge_attn_states", "zigzag_shard", "zigzag_unshard", "ring_shard", "ring_unshard",
    "ring_shard_lengths", "NcclTransport", "LocalTransport", "LocalRing",
]
