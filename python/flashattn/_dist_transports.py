"""Ring attention, transports: how K/V blocks travel to the next rank.

NcclTransport (torch.distributed point-to-point on a side stream) and LocalTransport / LocalRing
(all ranks in one process, transfers as device copies); the interface is described in
flashattn.distributed.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

from ._dist_sharding import _check_world_rank


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
