"""Ring attention, the algorithm: one rank's steps around the ring and the front ends that
drive them (ring_flash_attn_func over a transport, local_ring_flash_attn_func and
simulate_ring_flash_attn with all ranks in this process).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch

from ._dist_merge import _NEG_INF, _merge_into
from ._dist_sharding import (_check_world_rank, ring_shard, ring_unshard, zigzag_shard,
                             zigzag_unshard)
from ._dist_transports import LocalRing, LocalTransport, NcclTransport

AttnFn = Callable[..., Tuple[torch.Tensor, torch.Tensor]]


def _default_attn(q, k, v, softmax_scale, causal):
    from . import flash_attn_func  # the package's front end (needs torch + libflashattn)
    return flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, return_lse=True)


def _check_shapes(q, k, v) -> None:
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected a 4-D tensor (batch, seqlen, heads, headdim), "
                             f"got shape {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    if k.size(0) != q.size(0) or k.size(3) != q.size(3):
        raise ValueError(f"k/v shape {tuple(k.shape)} does not match q {tuple(q.shape)} in batch "
                         f"or headdim")
    if k.size(2) == 0 or q.size(2) % k.size(2):
        raise ValueError(f"q heads ({q.size(2)}) must be a multiple of k/v heads ({k.size(2)})")


def _ring_rank_steps(q, k, v, transport, causal: bool, softmax_scale, attn_fn: AttnFn,
                     stats: Optional[Dict[str, int]] = None):
    """Rank `transport.rank`'s ring attention, as a generator: it yields once per ring step,
    after posting that step's K/V exchange and computing on the block in hand, and before
    waiting for the exchange; it returns (out in q's dtype, lse fp32). Drivers: run it to the
    end (NCCL), or advance all ranks' generators in lockstep (LocalTransport)."""
    rank, world = transport.rank, transport.world_size
    B, Sq, Hq, D = q.shape
    k, v = k.contiguous(), v.contiguous()
    kv_lens = transport.all_seqlens(k.size(1))
    if causal:
        if any(n != k.size(1) for n in kv_lens) or Sq != k.size(1) or Sq % 2:
            raise ValueError(
                f"causal ring attention uses zigzag shards: every rank must hold the same even "
                f"number of queries and keys (2 chunks of S/(2*world)); rank {rank} has q "
                f"{Sq}, k/v lengths per rank {kv_lens} (use zigzag_shard on a sequence whose "
                f"length is divisible by 2*world)")
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    out_acc = torch.zeros((B, Sq, Hq, D), dtype=acc_dtype, device=q.device)
    lse_acc = torch.full((B, Hq, Sq), _NEG_INF, dtype=acc_dtype, device=q.device)
    c = Sq // 2
    fresh = True  # nothing merged yet into the full accumulators
    if stats is not None:
        stats.setdefault("calls", 0)
        stats.setdefault("skipped", 0)
        stats.setdefault("score_elems", 0)  # visible (query, key) pairs computed

    def count(nq, nk, diag):
        if stats is not None:
            stats["calls"] += 1
            stats["score_elems"] += nq * (nq + 1) // 2 if diag else nq * nk

    for step in range(world):
        src = (rank - step) % world  # the rank whose K/V block we hold now
        last = step == world - 1
        if not last:  # start the transfer first: it overlaps the compute below
            k_next, v_next = transport.send_recv_kv(k, v, kv_lens[(rank - step - 1) % world])
        Sk = k.size(1)
        if Sq == 0 or Sk == 0:
            if stats is not None:
                stats["skipped"] += 1
        elif not causal:
            o, l = attn_fn(q, k, v, softmax_scale, False)
            count(Sq, Sk, False)
            _merge_into(out_acc, lse_acc, o, l, fresh)
            fresh = False
        elif step == 0:  # own chunks: (r, r) and (2w-1-r, 2w-1-r) diagonal, one causal call
            o, l = attn_fn(q, k, v, softmax_scale, True)
            count(Sq, Sk, True)
            _merge_into(out_acc, lse_acc, o, l, fresh)
            fresh = False
        elif src < rank:  # k chunk src is before both q chunks; chunk 2w-1-src after both
            o, l = attn_fn(q, k[:, :c], v[:, :c], softmax_scale, False)
            count(Sq, c, False)
            if stats is not None:
                stats["skipped"] += 1
            _merge_into(out_acc, lse_acc, o, l, False)
        else:  # src > rank: q chunk r precedes both k chunks; q chunk 2w-1-r follows both
            o, l = attn_fn(q[:, c:], k, v, softmax_scale, False)
            count(c, Sk, False)
            if stats is not None:
                stats["skipped"] += 1
            _merge_into(out_acc[:, c:], lse_acc[:, :, c:], o, l, False)
        if not last:
            yield step
            transport.wait()
            k, v = k_next, v_next
    return out_acc.to(q.dtype), lse_acc  # lse: float32 (float64 for float64 inputs)


def _run_to_end(gen):
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _refuse_grad(*tensors):
    # The ring's forward merges partial results in place and receives K/V from other ranks
    # outside autograd: a backward through it would fail, or miss the remote K/V gradients.
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError(
            "ring attention has no backward yet: call it under torch.no_grad() or with inputs "
            "that do not require grad (flash_attn_func is differentiable on one GPU)")


def ring_flash_attn_func(q, k, v, causal=False, softmax_scale=None, group=None,
                         return_lse=False, transport=None):
    """Ring attention forward, called by every rank of `group` with its own shard.

    q: (batch, seqlen_q_local, nheads, headdim), k/v: (batch, seqlen_k_local, nheads_k,
    headdim), float16/bfloat16 CUDA tensors (GQA: nheads % nheads_k == 0). causal=True expects
    zigzag shards (zigzag_shard; equal q/k lengths divisible by 2 on every rank), causal=False
    contiguous shards of any lengths (ring_shard). softmax_scale defaults to 1/sqrt(headdim).
    Returns this rank's out (batch, seqlen_q_local, nheads, headdim), or (out, lse) with lse
    (batch, nheads, seqlen_q_local) float32 natural log, exactly as flash_attn_func would for
    these queries over the whole sequence.

    transport: None for NCCL over `group` (torch.distributed must be initialized), or any
    object with the transport interface (see flashattn.distributed's docstring). A
    LocalTransport cannot be driven one rank at a time: use local_ring_flash_attn_func for it.
    """
    _check_shapes(q, k, v)
    _refuse_grad(q, k, v)
    if transport is None:
        transport = NcclTransport(group, q.device)  # cheap: its side stream comes from a pool
    elif isinstance(transport, LocalTransport) and transport.world_size > 1:
        raise ValueError("a LocalTransport simulates all ranks at once: call "
                         "local_ring_flash_attn_func(q_shards, k_shards, v_shards, ...)")
    out, lse = _run_to_end(_ring_rank_steps(q, k, v, transport, bool(causal), softmax_scale,
                                            _default_attn))
    return (out, lse) if return_lse else out


def local_ring_flash_attn_func(q_shards, k_shards, v_shards, causal=False, softmax_scale=None,
                               return_lse=False, attn_fn: Optional[AttnFn] = None,
                               stats: Optional[List[Dict[str, int]]] = None):
    """All ranks of a ring in this process (LocalTransport, lockstep): shard lists in rank
    order in, a list of per-rank outputs (or (out, lse) pairs) out. The per-rank code is the
    same as ring_flash_attn_func's. attn_fn(q, k, v, softmax_scale, causal) -> (out, lse)
    replaces the library call (e.g. a float64 reference on the CPU); stats, if given, is filled
    with one dict of counters per rank."""
    world = len(q_shards)
    _refuse_grad(*q_shards, *k_shards, *v_shards)
    if world == 0 or len(k_shards) != world or len(v_shards) != world:
        raise ValueError(f"need the same positive number of q, k and v shards, got "
                         f"{len(q_shards)}, {len(k_shards)}, {len(v_shards)}")
    for q, k, v in zip(q_shards, k_shards, v_shards):
        _check_shapes(q, k, v)
    ring = LocalRing(world, [k.size(1) for k in k_shards])
    fn = _default_attn if attn_fn is None else attn_fn
    if stats is not None:
        stats[:] = [{} for _ in range(world)]
    gens = [_ring_rank_steps(q_shards[r], k_shards[r], v_shards[r], ring.transport(r),
                             bool(causal), softmax_scale, fn,
                             None if stats is None else stats[r]) for r in range(world)]
    results: List = [None] * world
    active = list(range(world))
    while active:  # lockstep: every rank posts step s before any rank waits for it
        still = []
        for r in active:
            try:
                next(gens[r])
                still.append(r)
            except StopIteration as stop:
                results[r] = stop.value
        active = still
    return results if return_lse else [o for o, _ in results]


def simulate_ring_flash_attn(q, k, v, world_size, causal=False, softmax_scale=None,
                             return_lse=False, attn_fn: Optional[AttnFn] = None,
                             stats: Optional[List[Dict[str, int]]] = None):
    """Ring attention of the full tensors q (B, S, Hq, D), k/v (B, Sk, Hkv, D) simulated on
    `world_size` ranks in this process: shards them (zigzag if causal, else contiguous), runs
    local_ring_flash_attn_func and reassembles the full out (and lse)."""
    _check_shapes(q, k, v)
    _check_world_rank(world_size)
    if causal and q.size(1) != k.size(1):
        raise ValueError(f"causal ring attention needs equal q and k/v lengths (zigzag "
                         f"sharding), got {q.size(1)} and {k.size(1)}")
    shard, unshard = (zigzag_shard, zigzag_unshard) if causal else (ring_shard, ring_unshard)
    qs = [shard(q, world_size, r) for r in range(world_size)]
    ks = [shard(k, world_size, r) for r in range(world_size)]
    vs = [shard(v, world_size, r) for r in range(world_size)]
    res = local_ring_flash_attn_func(qs, ks, vs, causal, softmax_scale, True, attn_fn, stats)
    out = unshard([o for o, _ in res], dim=1)
    if not return_lse:
        return out
    return out, unshard([l for _, l in res], dim=2)
