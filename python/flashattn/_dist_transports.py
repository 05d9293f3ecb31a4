"""Ring attention, transports: how K/V blocks (and, in the backward, their dK/dV accumulators)
travel to the next rank.

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
        self._reqs: Optional[list] = None       # pending K/V exchange
        self._grad_reqs: Optional[list] = None  # pending dK/dV exchange (backward)

    def all_seqlens(self, n: int) -> List[int]:
        if self.world_size == 1:
            return [int(n)]
        t = torch.tensor([int(n)], dtype=torch.int64, device=self.device)
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        self._dist.all_gather(out, t, group=self.group)
        return [int(x.item()) for x in out]

    def _exchange(self, pair: Tuple[torch.Tensor, torch.Tensor], n: int):
        """Post sending `pair` to the next rank and receiving the previous rank's pair (length
        n along dim 1, same dtype) into new buffers, on the side stream: (buffers, requests)."""
        dist = self._dist
        bufs = tuple(t.new_empty((t.size(0), n) + tuple(t.shape[2:])) for t in pair)
        compute = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(compute)  # the pair and the new buffers are ready on compute
        ops = []
        with torch.cuda.stream(self.stream):
            for t in pair:
                if t.numel():
                    ops.append(dist.P2POp(dist.isend, t, self.next_peer, self.group))
            for t in bufs:
                if t.numel():
                    ops.append(dist.P2POp(dist.irecv, t, self.prev_peer, self.group))
            reqs = dist.batch_isend_irecv(ops) if ops else []
        for t in pair + bufs:
            t.record_stream(self.stream)  # the allocator must not reuse them before the transfer
        return bufs, list(reqs)

    def _finish(self, reqs) -> None:
        with torch.cuda.stream(self.stream):
            for r in reqs:
                r.wait()  # the side stream waits for NCCL's stream (no host block)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)

    def send_recv_kv(self, k: torch.Tensor, v: torch.Tensor,
                     recv_seqlen: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        if self._reqs is not None:
            raise RuntimeError("NcclTransport: send_recv_kv called twice without wait()")
        n = k.size(1) if recv_seqlen is None else int(recv_seqlen)
        (k_next, v_next), self._reqs = self._exchange((k, v), n)
        return k_next, v_next

    def wait(self) -> None:
        if self._reqs is None:
            raise RuntimeError("NcclTransport: wait() without a pending send_recv_kv")
        reqs, self._reqs = self._reqs, None
        self._finish(reqs)

    def send_recv_grads(self, dk: torch.Tensor, dv: torch.Tensor,
                        recv_seqlen: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """The backward's second channel: this rank's (dk, dv) accumulators (fp32) to the next
        rank, the previous rank's into new buffers; independent of a pending send_recv_kv."""
        if self._grad_reqs is not None:
            raise RuntimeError("NcclTransport: send_recv_grads called twice without "
                               "wait_grads()")
        n = dk.size(1) if recv_seqlen is None else int(recv_seqlen)
        (dk_next, dv_next), self._grad_reqs = self._exchange((dk, dv), n)
        return dk_next, dv_next

    def wait_grads(self) -> None:
        if self._grad_reqs is None:
            raise RuntimeError("NcclTransport: wait_grads() without a pending send_recv_grads")
        reqs, self._grad_reqs = self._grad_reqs, None
        self._finish(reqs)


class LocalRing:
    """Shared state of `world_size` simulated ranks in one process: per-channel ("kv" for the
    K/V blocks, "grads" for the backward's dK/dV accumulators), per-destination mailboxes
    matching each rank's posted send with the next rank's posted receive (in either order)."""

    CHANNELS = ("kv", "grads")

    def __init__(self, world_size: int, seqlens: Optional[Sequence[int]] = None):
        _check_world_rank(world_size)
        self.world_size = int(world_size)
        self.seqlens = None if seqlens is None else [int(s) for s in seqlens]
        # FIFO per channel and destination (sent, not yet received) or receiver (posted
        # receives, not yet matched)
        self._sent = {c: [[] for _ in range(self.world_size)] for c in self.CHANNELS}
        self._recv = {c: [[] for _ in range(self.world_size)] for c in self.CHANNELS}

    def transport(self, rank: int) -> "LocalTransport":
        return LocalTransport(self, rank)

    @staticmethod
    def _deliver(slot: dict, a: torch.Tensor, b: torch.Tensor) -> None:
        ab, bb = slot["buffers"]
        if ab.shape != a.shape or bb.shape != b.shape or ab.dtype != a.dtype:
            raise RuntimeError(f"LocalTransport: rank {slot['rank']} expected a {slot['channel']} "
                               f"block of shape {tuple(ab.shape)} {ab.dtype}, the previous rank "
                               f"sent {tuple(a.shape)} {a.dtype}")
        ab.copy_(a)  # the simulated transfer: a device copy
        bb.copy_(b)
        slot["done"] = True

    def _post_send(self, channel: str, dst: int, a: torch.Tensor, b: torch.Tensor) -> None:
        if self._recv[channel][dst]:
            self._deliver(self._recv[channel][dst].pop(0), a, b)
        else:
            self._sent[channel][dst].append((a, b))

    def _post_recv(self, slot: dict) -> None:
        r, channel = slot["rank"], slot["channel"]
        if self._sent[channel][r]:
            a, b = self._sent[channel][r].pop(0)
            self._deliver(slot, a, b)
        else:
            self._recv[channel][r].append(slot)


class LocalTransport:
    """One simulated rank of a LocalRing (see local_ring_flash_attn_func). Its ranks must run
    in lockstep: every rank posts step s's exchange before any rank waits for it."""

    def __init__(self, ring: LocalRing, rank: int):
        _check_world_rank(ring.world_size, rank)
        self.ring = ring
        self.rank = int(rank)
        self.world_size = ring.world_size
        self._slots = {c: None for c in LocalRing.CHANNELS}  # the pending receive per channel

    def all_seqlens(self, n: int) -> List[int]:
        lens = self.ring.seqlens
        if lens is None:
            raise RuntimeError("LocalTransport: the LocalRing was built without seqlens")
        if lens[self.rank] != n:
            raise RuntimeError(f"LocalTransport: rank {self.rank} holds {n} keys but the ring "
                               f"was told {lens[self.rank]}")
        return list(lens)

    def _post(self, channel: str, a: torch.Tensor, b: torch.Tensor,
              recv_seqlen: Optional[int]) -> Tuple[torch.Tensor, torch.Tensor]:
        if self._slots[channel] is not None:
            what = "send_recv_kv" if channel == "kv" else "send_recv_grads"
            raise RuntimeError(f"LocalTransport: {what} called twice without waiting")
        n = a.size(1) if recv_seqlen is None else int(recv_seqlen)
        bufs = tuple(t.new_empty((t.size(0), n) + tuple(t.shape[2:])) for t in (a, b))
        slot = {"rank": self.rank, "channel": channel, "buffers": bufs, "done": False}
        self._slots[channel] = slot
        self.ring._post_recv(slot)
        self.ring._post_send(channel, (self.rank + 1) % self.world_size, a, b)
        return bufs

    def _wait(self, channel: str) -> None:
        slot, self._slots[channel] = self._slots[channel], None
        if slot is None:
            what = "wait()" if channel == "kv" else "wait_grads()"
            raise RuntimeError(f"LocalTransport: {what} without a pending exchange")
        if not slot["done"]:
            raise RuntimeError(f"LocalTransport: rank {self.rank} waits for a {channel} block "
                               f"that rank {(self.rank - 1) % self.world_size} has not sent: the "
                               f"simulated ranks are not run in lockstep")

    def send_recv_kv(self, k: torch.Tensor, v: torch.Tensor,
                     recv_seqlen: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._post("kv", k, v, recv_seqlen)

    def wait(self) -> None:
        self._wait("kv")

    def send_recv_grads(self, dk: torch.Tensor, dv: torch.Tensor,
                        recv_seqlen: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._post("grads", dk, dv, recv_seqlen)

    def wait_grads(self) -> None:
        self._wait("grads")
