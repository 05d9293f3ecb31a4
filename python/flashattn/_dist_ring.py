"""Ring attention, the algorithm: one rank's steps around the ring, forward and backward, the
autograd Functions that join them, and the front ends that drive them (ring_flash_attn_func
over a transport, local_ring_flash_attn_func and simulate_ring_flash_attn with all ranks in
this process).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from ._dist_merge import _NEG_INF, _merge_into
from ._dist_sharding import (_check_world_rank, ring_shard, ring_unshard, zigzag_shard,
                             zigzag_unshard)
from ._dist_transports import LocalRing, LocalTransport, NcclTransport

AttnFn = Callable[..., Tuple[torch.Tensor, torch.Tensor]]
AttnBwdFn = Callable[..., Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def _default_attn(q, k, v, softmax_scale, causal):
    from . import flash_attn_func  # the package's front end (needs torch + libflashattn)
    return flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, return_lse=True)


def _default_attn_bwd(dout, q, k, v, out, lse, softmax_scale, causal):
    """(dq, dk, dv) of one block from the library's backward. out and lse are the GLOBAL ones
    (the merged result over the whole sequence, restricted to these queries): the backward
    then recomputes the block's probabilities exactly, P = exp(scale * q.k - lse), and uses
    rowsum(dout * out) of the whole row, which makes its (dq, dk, dv) this block's exact share
    of the full attention's gradients."""
    from . import flash_attn_backward
    return flash_attn_backward(dout, q, k, v, out, lse, softmax_scale, causal)


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


def _check_causal_lengths(rank, Sq, Sk, kv_lens) -> None:
    if any(n != Sk for n in kv_lens) or Sq != Sk or Sq % 2:
        raise ValueError(
            f"causal ring attention uses zigzag shards: every rank must hold the same even "
            f"number of queries and keys (2 chunks of S/(2*world)); rank {rank} has q "
            f"{Sq}, k/v lengths per rank {kv_lens} (use zigzag_shard on a sequence whose "
            f"length is divisible by 2*world)")


def _ring_rank_steps(q, k, v, transport, causal: bool, softmax_scale, attn_fn: AttnFn,
                     stats: Optional[Dict[str, int]] = None,
                     kv_lens: Optional[List[int]] = None):
    """Rank `transport.rank`'s ring attention, as a generator: it yields once per ring step,
    after posting that step's K/V exchange and computing on the block in hand, and before
    waiting for the exchange; it returns (out in q's dtype, lse fp32). Drivers: run it to the
    end (NCCL), or advance all ranks' generators in lockstep (LocalTransport). kv_lens: every
    rank's K/V length, when the caller already has them (else asked of the transport)."""
    rank, world = transport.rank, transport.world_size
    B, Sq, Hq, D = q.shape
    k, v = k.contiguous(), v.contiguous()
    if kv_lens is None:
        kv_lens = transport.all_seqlens(k.size(1))
    if causal:
        _check_causal_lengths(rank, Sq, k.size(1), kv_lens)
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


def _ring_rank_bwd_steps(dout, q, k, v, out, lse, transport, causal: bool, softmax_scale,
                         attn_bwd_fn: AttnBwdFn, kv_lens: List[int]):
    """Rank `transport.rank`'s ring attention backward, as a generator (driven like
    _ring_rank_steps; it yields once per step, `world` times when world > 1); it returns
    (dq, dk, dv) in the dtypes of q, k, v.

    q, k, v: this rank's shards (k, v contiguous); out, lse: the forward's merged results
    for these queries; kv_lens: every rank's K/V length. The K/V blocks travel the ring again
    as in the forward, and each block's dK/dV accumulator (fp32, or fp64 for fp64 inputs)
    travels with it, one exchange behind: at step s this rank holds block src = rank - s,
    computes its queries' share of that block's gradients (the same calls as the forward's,
    each a backward with the global out and lse), waits for the block's accumulator (sent by
    rank - 1 after its step s - 1), adds the share and sends the accumulator on to rank + 1,
    which holds block src at step s + 1. After step world - 1 the accumulator of block
    rank + 1 goes to rank + 1, its owner: one hop more than the K/V blocks make. dQ stays here.
    """
    rank, world = transport.rank, transport.world_size
    B, Sq, Hq, D = q.shape
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    dq = torch.zeros((B, Sq, Hq, D), dtype=acc_dtype, device=q.device)
    c = Sq // 2
    if causal and Sq:  # the second local chunk's rows, for the steps that use only them
        dout_hi, q_hi, out_hi = (t[:, c:].contiguous() for t in (dout, q, out))
        lse_hi = lse[:, :, c:].contiguous()
    dk_acc = dv_acc = dk_next = dv_next = None
    for step in range(world):
        src = (rank - step) % world  # the rank whose K/V block we hold now
        last = step == world - 1
        recv_len = kv_lens[(rank - step - 1) % world]  # the block held at step + 1
        if not last:  # start the K/V transfer first: it overlaps the compute below
            k_next, v_next = transport.send_recv_kv(k, v, recv_len)
        Sk = k.size(1)
        share = None  # (dk, dv, number of leading keys they cover or None for all)
        if Sq == 0 or Sk == 0:
            pass
        elif not causal or step == 0:  # step 0 of causal: the own chunks, one causal call
            gq, gk, gv = attn_bwd_fn(dout, q, k, v, out, lse, softmax_scale,
                                     causal and step == 0)
            dq.add_(gq)
            share = (gk, gv, None)
        elif src < rank:  # all local queries against the block's first chunk
            gq, gk, gv = attn_bwd_fn(dout, q, k[:, :c], v[:, :c], out, lse, softmax_scale,
                                     False)
            dq.add_(gq)
            share = (gk, gv, c)
        else:  # src > rank: the second local chunk against the whole block
            gq, gk, gv = attn_bwd_fn(dout_hi, q_hi, k, v, out_hi, lse_hi, softmax_scale, False)
            dq[:, c:].add_(gq)
            share = (gk, gv, None)
        if step == 0:
            dk_acc = torch.zeros(k.shape, dtype=acc_dtype, device=k.device)
            dv_acc = torch.zeros(v.shape, dtype=acc_dtype, device=v.device)
        else:  # the accumulator of the block in hand, from rank - 1
            transport.wait_grads()
            dk_acc, dv_acc = dk_next, dv_next
        if share is not None:
            gk, gv, n = share
            if n is None:
                dk_acc.add_(gk)
                dv_acc.add_(gv)
            else:
                dk_acc[:, :n].add_(gk)
                dv_acc[:, :n].add_(gv)
        if world > 1:
            # on to rank + 1 (after the last step: to the block's owner); we receive the
            # accumulator of the block we hold next (after the last step: our own block's)
            dk_next, dv_next = transport.send_recv_grads(dk_acc, dv_acc, recv_len)
            yield step
            if not last:
                transport.wait()
                k, v = k_next, v_next
    if world > 1:
        transport.wait_grads()
        dk_acc, dv_acc = dk_next, dv_next
    return dq.to(q.dtype), dk_acc.to(k.dtype), dv_acc.to(v.dtype)


def _run_to_end(gen):
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _lockstep(gens) -> list:
    """Run the generators of all simulated ranks in lockstep (every rank posts step s before
    any rank waits for it); their return values in rank order."""
    results: List = [None] * len(gens)
    active = list(range(len(gens)))
    while active:
        still = []
        for r in active:
            try:
                next(gens[r])
                still.append(r)
            except StopIteration as stop:
                results[r] = stop.value
        active = still
    return results


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _refuse_lse_grad(grad_lse) -> None:
    if any(g is not None for g in grad_lse):
        raise NotImplementedError(
            "ring attention: the gradient of lse (return_lse=True with lse used by the loss) "
            "is not supported; the gradients flow back through out only (detach lse, or use it "
            "outside the loss)")


class _RingAttnFn(torch.autograd.Function):
    """One rank's ring attention (over a transport driven by this rank alone, e.g. NCCL) with
    its backward; every rank of the ring must run the backward too."""

    @staticmethod
    def forward(ctx, q, k, v, transport, causal, softmax_scale, attn_fn, attn_bwd_fn):
        k, v = k.contiguous(), v.contiguous()
        kv_lens = transport.all_seqlens(k.size(1))
        out, lse = _run_to_end(_ring_rank_steps(q, k, v, transport, causal, softmax_scale,
                                                attn_fn, kv_lens=kv_lens))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ring = (transport, causal, softmax_scale, attn_bwd_fn, kv_lens)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, grad_lse):
        _refuse_lse_grad([grad_lse])
        q, k, v, out, lse = ctx.saved_tensors
        transport, causal, softmax_scale, attn_bwd_fn, kv_lens = ctx.ring
        if grad_out is None:  # still take part: the other ranks' gradients pass through here
            grad_out = torch.zeros_like(out)
        dq, dk, dv = _run_to_end(_ring_rank_bwd_steps(grad_out, q, k, v, out, lse, transport,
                                                      causal, softmax_scale, attn_bwd_fn,
                                                      kv_lens))
        return dq, dk, dv, None, None, None, None, None


class _LocalRingAttnFn(torch.autograd.Function):
    """All ranks of a LocalRing at once: inputs the q, k and v shards (rank order, flattened),
    outputs every rank's out, then every rank's lse."""

    @staticmethod
    def forward(ctx, world, causal, softmax_scale, attn_fn, attn_bwd_fn, stats, *shards):
        qs = shards[:world]
        ks = [t.contiguous() for t in shards[world:2 * world]]
        vs = [t.contiguous() for t in shards[2 * world:]]
        res = _local_forward(qs, ks, vs, causal, softmax_scale, attn_fn, stats)
        outs, lses = [o for o, _ in res], [l for _, l in res]
        ctx.save_for_backward(*qs, *ks, *vs, *outs, *lses)
        ctx.ring = (world, causal, softmax_scale, attn_bwd_fn)
        ctx.set_materialize_grads(False)
        return tuple(outs) + tuple(lses)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        world, causal, softmax_scale, attn_bwd_fn = ctx.ring
        _refuse_lse_grad(grads[world:])
        saved = ctx.saved_tensors
        qs, ks, vs, outs, lses = (saved[i * world:(i + 1) * world] for i in range(5))
        douts = [torch.zeros_like(o) if g is None else g for g, o in zip(grads[:world], outs)]
        kv_lens = [k.size(1) for k in ks]
        ring = LocalRing(world, kv_lens)
        res = _lockstep([_ring_rank_bwd_steps(douts[r], qs[r], ks[r], vs[r], outs[r], lses[r],
                                              ring.transport(r), causal, softmax_scale,
                                              attn_bwd_fn, kv_lens) for r in range(world)])
        return ((None,) * 6 + tuple(g[0] for g in res) + tuple(g[1] for g in res)
                + tuple(g[2] for g in res))


def ring_flash_attn_func(q, k, v, causal=False, softmax_scale=None, group=None,
                         return_lse=False, transport=None):
    """Ring attention, called by every rank of `group` with its own shard; differentiable.

    q: (batch, seqlen_q_local, nheads, headdim), k/v: (batch, seqlen_k_local, nheads_k,
    headdim), float16/bfloat16 CUDA tensors (GQA: nheads % nheads_k == 0). causal=True expects
    zigzag shards (zigzag_shard; equal q/k lengths divisible by 2 on every rank), causal=False
    contiguous shards of any lengths (ring_shard). softmax_scale defaults to 1/sqrt(headdim).
    Returns this rank's out (batch, seqlen_q_local, nheads, headdim), or (out, lse) with lse
    (batch, nheads, seqlen_q_local) float32 natural log, exactly as flash_attn_func would for
    these queries over the whole sequence.

    Autograd: when q, k or v requires grad (and grad mode is on) the call records a backward
    that every rank must run (loss.backward() on each rank, as with any collective): it
    returns this rank's dq, dk, dv, the K/V gradients gathered from all ranks' queries. The
    gradient flows through out only; a loss that uses lse raises NotImplementedError in the
    backward. Without grad the call is the plain forward, nothing saved.

    transport: None for NCCL over `group` (torch.distributed must be initialized), or any
    object with the transport interface (see flashattn.distributed's docstring). A
    LocalTransport cannot be driven one rank at a time: use local_ring_flash_attn_func for it.
    """
    _check_shapes(q, k, v)
    if transport is None:
        transport = NcclTransport(group, q.device)  # cheap: its side stream comes from a pool
    elif isinstance(transport, LocalTransport) and transport.world_size > 1:
        raise ValueError("a LocalTransport simulates all ranks at once: call "
                         "local_ring_flash_attn_func(q_shards, k_shards, v_shards, ...)")
    if _needs_grad(q, k, v):
        out, lse = _RingAttnFn.apply(q, k, v, transport, bool(causal), softmax_scale,
                                     _default_attn, _default_attn_bwd)
    else:
        out, lse = _run_to_end(_ring_rank_steps(q, k, v, transport, bool(causal),
                                                softmax_scale, _default_attn))
    return (out, lse) if return_lse else out


def _local_forward(q_shards, k_shards, v_shards, causal, softmax_scale, attn_fn, stats):
    """The forward of all ranks in lockstep: a list of per-rank (out, lse)."""
    world = len(q_shards)
    ring = LocalRing(world, [k.size(1) for k in k_shards])
    if stats is not None:
        stats[:] = [{} for _ in range(world)]
    return _lockstep([_ring_rank_steps(q_shards[r], k_shards[r], v_shards[r], ring.transport(r),
                                       causal, softmax_scale, attn_fn,
                                       None if stats is None else stats[r])
                      for r in range(world)])


def local_ring_flash_attn_func(q_shards, k_shards, v_shards, causal=False, softmax_scale=None,
                               return_lse=False, attn_fn: Optional[AttnFn] = None,
                               stats: Optional[List[Dict[str, int]]] = None,
                               attn_bwd_fn: Optional[AttnBwdFn] = None):
    """All ranks of a ring in this process (LocalTransport, lockstep): shard lists in rank
    order in, a list of per-rank outputs (or (out, lse) pairs) out. The per-rank code is the
    same as ring_flash_attn_func's, and so is the autograd: gradients reach every shard.
    attn_fn(q, k, v, softmax_scale, causal) -> (out, lse) replaces the library's forward
    (e.g. a float64 reference on the CPU), attn_bwd_fn(dout, q, k, v, out, lse, softmax_scale,
    causal) -> (dq, dk, dv) its backward (called with the global out and lse of the queries
    given; dk/dv shaped like k/v); stats, if given, is filled with one dict of forward counters
    per rank."""
    world = len(q_shards)
    if world == 0 or len(k_shards) != world or len(v_shards) != world:
        raise ValueError(f"need the same positive number of q, k and v shards, got "
                         f"{len(q_shards)}, {len(k_shards)}, {len(v_shards)}")
    for q, k, v in zip(q_shards, k_shards, v_shards):
        _check_shapes(q, k, v)
    fn = _default_attn if attn_fn is None else attn_fn
    bwd_fn = _default_attn_bwd if attn_bwd_fn is None else attn_bwd_fn
    if _needs_grad(*q_shards, *k_shards, *v_shards):
        res = _LocalRingAttnFn.apply(world, bool(causal), softmax_scale, fn, bwd_fn, stats,
                                     *q_shards, *k_shards, *v_shards)
        results = list(zip(res[:world], res[world:]))
    else:
        results = _local_forward(q_shards, k_shards, v_shards, bool(causal), softmax_scale, fn,
                                 stats)
    return results if return_lse else [o for o, _ in results]


def simulate_ring_flash_attn(q, k, v, world_size, causal=False, softmax_scale=None,
                             return_lse=False, attn_fn: Optional[AttnFn] = None,
                             stats: Optional[List[Dict[str, int]]] = None,
                             attn_bwd_fn: Optional[AttnBwdFn] = None):
    """Ring attention of the full tensors q (B, S, Hq, D), k/v (B, Sk, Hkv, D) simulated on
    `world_size` ranks in this process: shards them (zigzag if causal, else contiguous), runs
    local_ring_flash_attn_func and reassembles the full out (and lse). Differentiable (the
    sharding and reassembly are torch ops, the ring is local_ring_flash_attn_func)."""
    _check_shapes(q, k, v)
    _check_world_rank(world_size)
    if causal and q.size(1) != k.size(1):
        raise ValueError(f"causal ring attention needs equal q and k/v lengths (zigzag "
                         f"sharding), got {q.size(1)} and {k.size(1)}")
    shard, unshard = (zigzag_shard, zigzag_unshard) if causal else (ring_shard, ring_unshard)
    qs = [shard(q, world_size, r) for r in range(world_size)]
    ks = [shard(k, world_size, r) for r in range(world_size)]
    vs = [shard(v, world_size, r) for r in range(world_size)]
    res = local_ring_flash_attn_func(qs, ks, vs, causal, softmax_scale, True, attn_fn, stats,
                                     attn_bwd_fn)
    out = unshard([o for o, _ in res], dim=1)
    if not return_lse:
        return out
    return out, unshard([l for _, l in res], dim=2)
