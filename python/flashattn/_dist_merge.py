"""Ring attention, merge: combining partial attention results with their log-sum-exp."""
from __future__ import annotations

from typing import Tuple

import torch

_NEG_INF = float("-inf")


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
