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

Only the forward pass is provided (the library has no backward kernel yet).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

__all__ = [
    "ring_flash_attn_func", "local_ring_flash_attn_func", "simulate_ring_flash_attn",
    "merge_attn_states", "zigzag_shard", "zigzag_unshard", "ring_shard", "ring_unshard",
    "ring_shard_lengths", "NcclTransport", "LocalTransport", "LocalRing",
]

AttnFn = Callable[..., Tuple[torch.Tensor, torch.Tensor]]

_NEG_INF = float("-inf")


# ----------------------------------------------------------------------------- sharding

def _norm_dim(x: torch.Tensor, dim: int) -> int:
    if not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim {dim} out of range for a {x.dim()}-D tensor")
    return dim % x.dim()


def _check_world_rank(world: int, rank: Optional[int] = None) -> None:
    if int(world) != world or world < 1:
        raise ValueError(f"world size must be a positive integer, got {world}")
    if rank is not None and not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")


def zigzag_shard(x: torch.Tensor, world: int, rank: int, dim: int = 1) -> torch.Tensor:
    """Rank `rank`'s zigzag shard of `x` along `dim`: chunks rank and 2*world-1-rank of the
    2*world equal chunks, concatenated (a new tensor). x.size(dim) must be divisible by
    2*world."""
    _check_world_rank(world, rank)
    dim = _norm_dim(x, dim)
    S = x.size(dim)
    if S % (2 * world):
        raise ValueError(
            f"zigzag sharding (causal ring attention) needs the sequence length to be divisible "
            f"by 2*world = {2 * world}, got {S}; pad the sequence (e.g. to a multiple of "
            f"{2 * world}) or use causal=False, whose contiguous shards may be uneven")
    c = S // (2 * world)
    return torch.cat([x.narrow(dim, rank * c, c), x.narrow(dim, (2 * world - 1 - rank) * c, c)],
                     dim=dim)


def zigzag_unshard(shards: Sequence[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """Inverse of zigzag_shard: the full tensor from the shards of ranks 0..world-1, in order.
    Use dim=2 for lse tensors (batch, heads, seqlen)."""
    world = len(shards)
    if world == 0:
        raise ValueError("zigzag_unshard: no shards")
    dim = _norm_dim(shards[0], dim)
    n = shards[0].size(dim)
    if n % 2 or any(s.size(dim) != n for s in shards):
        raise ValueError(f"zigzag_unshard: shards must all have the same even length along dim "
                         f"{dim}, got {[s.size(dim) for s in shards]}")
    c = n // 2
    chunks: List[Optional[torch.Tensor]] = [None] * (2 * world)
    for r, s in enumerate(shards):
        chunks[r] = s.narrow(dim, 0, c)
        chunks[2 * world - 1 - r] = s.narrow(dim, c, c)
    return torch.cat(chunks, dim=dim)


def ring_shard_lengths(seqlen: int, world: int) -> List[int]:
    """Contiguous (non-causal) shard lengths: ceil(seqlen / world) each, the last one(s)
    shorter (possibly 0)."""
    _check_world_rank(world)
    chunk = -(-seqlen // world)
    return [max(0, min(chunk, seqlen - r * chunk)) for r in range(world)]


def ring_shard(x: torch.Tensor, world: int, rank: int, dim: int = 1) -> torch.Tensor:
    """Rank `rank`'s contiguous shard of `x` along `dim` (non-causal ring attention): a view
    of length ring_shard_lengths(S, world)[rank]."""
    _check_world_rank(world, rank)
    dim = _norm_dim(x, dim)
    lens = ring_shard_lengths(x.size(dim), world)
    return x.narrow(dim, sum(lens[:rank]), lens[rank])


def ring_unshard(shards: Sequence[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """Inverse of ring_shard (concatenation along dim; dim=2 for lse)."""
    if len(shards) == 0:
        raise ValueError("ring_unshard: no shards")
    return torch.cat(list(shards), dim=dim)


# ----------------------------------------------------------------------------- merge

def merge_attn_states(out1: torch.Tensor, lse1: torch.Tensor, out2: torch.Tensor,
                      lse2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Combine two partial attention results over disjoint key sets.

    out: (batch, seqlen, heads, headdim), lse: (batch, heads, seqlen) natural-log sum of
    exp(scores). Returns (out, lse) of the attention over the union of the keys:
        lse = m + log(exp(lse1 - m) + exp(lse2 - m)),  m = max(lse1, lse2)
        out = out1 * exp(lse1 - lse) + out2 * exp(lse2 - lse)
    A row with lse = -inf (no visible key) gets weight 0; a row masked in both gives out = 0 and
    lse = -inf, never NaN. Computed in the wider of fp32 and the lse dtype (fp64 stays fp64).
    """
    acc = torch.promote_types(torch.promote_types(lse1.dtype, lse2.dtype), torch.float32)
    l1, l2 = lse1.to(acc), lse2.to(acc)
    m = torch.maximum(l1, l2)
    m = m.masked_fill(m == _NEG_INF, 0.0)  # both -inf: any finite shift works
    lse = m + torch.log(torch.exp(l1 - m) + torch.exp(l2 - m))  # log(0) = -inf: both masked
    shift = lse.masked_fill(lse == _NEG_INF, 0.0)
    w1 = torch.exp(l1 - shift).transpose(1, 2).unsqueeze(-1)  # (B, S, H, 1)
    w2 = torch.exp(l2 - shift).transpose(1, 2).unsqueeze(-1)
    out = out1.to(acc) * w1 + out2.to(acc) * w2
    return out, lse


def _merge_into(out_acc: torch.Tensor, lse_acc: torch.Tensor, out_b: torch.Tensor,
                lse_b: torch.Tensor, fresh: bool) -> None:
    """In-place update of the accumulators (possibly views) with one block's result."""
    if fresh:
        out_acc.copy_(out_b)
        lse_acc.copy_(lse_b)
        return
    out, lse = merge_attn_states(out_acc, lse_acc, out_b, lse_b)
    out_acc.copy_(out)
    lse_acc.copy_(lse)


# ----------------------------------------------------------------------------- transports

def _peer(group, group_rank: int) -> int:
    import torch.distributed as dist
    if group is None or group is dist.group.WORLD:
        return group_rank
    return dist.get_global_rank(group, group_rank)


class NcclTransport:
    """Ring transport over torch.distributed (NCCL): point-to-point ops batched with
    dist.batch_isend_irecv on a side stream. The process group must be initialized and the
    current CUDA device set (torch.cuda.set_device(local_rank))."""

    def __init__(self, group=None, device: Optional[torch.device] = None):
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "ring_flash_attn_func: torch.distributed is not initialized; call "
                "dist.init_process_group('nccl') first (e.g. under torchrun), or use "
                "local_ring_flash_attn_func / simulate_ring_flash_attn to run all ranks on one "
                "device")
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None \
            else torch.device(device)
        self.next_peer = _peer(group, (self.rank + 1) % self.world_size)
        self.prev_peer = _peer(group, (self.rank - 1) % self.world_size)
        self.stream = torch.cuda.Stream(device=self.device)
        self._reqs: Optional[list] = None

    def all_seqlens(self, n: int) -> List[int]:
        if self.world_size == 1:
            return [int(n)]
        t = torch.tensor([int(n)], dtype=torch.int64, device=self.device)
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        self._dist.all_gather(out, t, group=self.group)
        return [int(x.item()) for x in out]

    def send_recv_kv(self, k: torch.Tensor, v: torch.Tensor,
                     recv_seqlen: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        if self._reqs is not None:
            raise RuntimeError("NcclTransport: send_recv_kv called twice without wait()")
        dist = self._dist
        n = k.size(1) if recv_seqlen is None else int(recv_seqlen)
        k_next = k.new_empty((k.size(0), n) + tuple(k.shape[2:]))
        v_next = v.new_empty((v.size(0), n) + tuple(v.shape[2:]))
        compute = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(compute)  # k, v and the new buffers are ready on compute
        ops = []
        with torch.cuda.stream(self.stream):
            for t in (k, v):
                if t.numel():
                    ops.append(dist.P2POp(dist.isend, t, self.next_peer, self.group))
            for t in (k_next, v_next):
                if t.numel():
                    ops.append(dist.P2POp(dist.irecv, t, self.prev_peer, self.group))
            reqs = dist.batch_isend_irecv(ops) if ops else []
        for t in (k, v, k_next, v_next):
            t.record_stream(self.stream)  # the allocator must not reuse them before the transfer
        self._reqs = list(reqs)
        return k_next, v_next

    def wait(self) -> None:
        if self._reqs is None:
            raise RuntimeError("NcclTransport: wait() without a pending send_recv_kv")
        with torch.cuda.stream(self.stream):
            for r in self._reqs:
                r.wait()  # the side stream waits for NCCL's stream (no host block)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        self._reqs = None


class LocalRing:
    """Shared state of `world_size` simulated ranks in one process: per-destination mailboxes
    matching each rank's posted send with the next rank's posted receive (in either order)."""

    def __init__(self, world_size: int, seqlens: Optional[Sequence[int]] = None):
        _check_world_rank(world_size)
        self.world_size = int(world_size)
        self.seqlens = None if seqlens is None else [int(s) for s in seqlens]
        self._sent: List[list] = [[] for _ in range(self.world_size)]   # FIFO per destination
        self._recv: List[list] = [[] for _ in range(self.world_size)]   # FIFO per receiver

    def transport(self, rank: int) -> "LocalTransport":
        return LocalTransport(self, rank)

    @staticmethod
    def _deliver(slot: dict, k: torch.Tensor, v: torch.Tensor) -> None:
        kb, vb = slot["buffers"]
        if kb.shape != k.shape or vb.shape != v.shape:
            raise RuntimeError(f"LocalTransport: rank {slot['rank']} expected a K/V block of "
                               f"shape {tuple(kb.shape)}, the previous rank sent "
                               f"{tuple(k.shape)}")
        kb.copy_(k)  # the simulated transfer: a device copy
        vb.copy_(v)
        slot["done"] = True

    def _post_send(self, dst: int, k: torch.Tensor, v: torch.Tensor) -> None:
        if self._recv[dst]:
            self._deliver(self._recv[dst].pop(0), k, v)
        else:
            self._sent[dst].append((k, v))

    def _post_recv(self, slot: dict) -> None:
        r = slot["rank"]
        if self._sent[r]:
            k, v = self._sent[r].pop(0)
            self._deliver(slot, k, v)
        else:
            self._recv[r].append(slot)


class LocalTransport:
    """One simulated rank of a LocalRing (see local_ring_flash_attn_func). Its ranks must run
    in lockstep: every rank posts step s's exchange before any rank waits for it."""

    def __init__(self, ring: LocalRing, rank: int):
        _check_world_rank(ring.world_size, rank)
        self.ring = ring
        self.rank = int(rank)
        self.world_size = ring.world_size
        self._slot: Optional[dict] = None

    def all_seqlens(self, n: int) -> List[int]:
        lens = self.ring.seqlens
        if lens is None:
            raise RuntimeError("LocalTransport: the LocalRing was built without seqlens")
        if lens[self.rank] != n:
            raise RuntimeError(f"LocalTransport: rank {self.rank} holds {n} keys but the ring "
                               f"was told {lens[self.rank]}")
        return list(lens)

    def send_recv_kv(self, k: torch.Tensor, v: torch.Tensor,
                     recv_seqlen: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        if self._slot is not None:
            raise RuntimeError("LocalTransport: send_recv_kv called twice without wait()")
        n = k.size(1) if recv_seqlen is None else int(recv_seqlen)
        k_next = k.new_empty((k.size(0), n) + tuple(k.shape[2:]))
        v_next = v.new_empty((v.size(0), n) + tuple(v.shape[2:]))
        self._slot = {"rank": self.rank, "buffers": (k_next, v_next), "done": False}
        self.ring._post_recv(self._slot)
        self.ring._post_send((self.rank + 1) % self.world_size, k, v)
        return k_next, v_next

    def wait(self) -> None:
        slot, self._slot = self._slot, None
        if slot is None:
            raise RuntimeError("LocalTransport: wait() without a pending send_recv_kv")
        if not slot["done"]:
            raise RuntimeError(f"LocalTransport: rank {self.rank} waits for a block that rank "
                               f"{(self.rank - 1) % self.world_size} has not sent: the simulated "
                               f"ranks are not run in lockstep")


# ----------------------------------------------------------------------------- the algorithm

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
    object with the transport interface (see the module docstring). A LocalTransport cannot be
    driven one rank at a time: use local_ring_flash_attn_func for it.
    """
    _check_shapes(q, k, v)
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
