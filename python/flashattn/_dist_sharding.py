"""Ring attention, sharding: which part of the sequence each rank holds.

Zigzag shards (causal, load balanced) and contiguous shards (non-causal, any length), each with
its inverse; see flashattn.distributed for how the ring uses them.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch


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
