"""Naive attention in torch, used as the fp32/fp64 reference and as the low-precision yardstick,
forward (attention) and backward (attention_grads, by torch autograd through the same math)."""
import math

import torch


def attention(q, k, v, softmax_scale=None, causal=False, dtype=torch.float32):
    """Attention computed with plain torch ops in `dtype`; returns out (B, Sq, Hq, D) in `dtype`
    and lse (B, Hq, Sq) from the `dtype` scores, in the wider of fp32 and `dtype`. GQA by repeating K/V heads; causal mask
    bottom-right aligned; fully masked rows give out 0 and lse -inf."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(D)
    qh = q.to(dtype).transpose(1, 2)
    kh = k.to(dtype).transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    vh = v.to(dtype).transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    s = torch.matmul(qh, kh.transpose(-1, -2)) * scale  # (B, Hq, Sq, Sk)
    if causal:
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (Sk - Sq), float("-inf"))
    lse = torch.logsumexp(s.to(torch.promote_types(dtype, torch.float32)), dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0).to(dtype)
    out = torch.matmul(p, vh).transpose(1, 2).contiguous()
    return out, lse


def attention_grads(q, k, v, dout, softmax_scale=None, causal=False, dtype=torch.float64,
                    dlse=None):
    """(dq, dk, dv) in `dtype` of sum(dout * out) (+ sum(dlse * lse) when dlse is given) for
    attention() computed in `dtype`; dk/dv shaped like k/v (GQA's repeat sums them back).
    Works inside a backward too (where grad mode is off)."""
    with torch.enable_grad():
        qd, kd, vd = (t.detach().to(dtype).requires_grad_() for t in (q, k, v))
        out, lse = attention(qd, kd, vd, softmax_scale, causal, dtype)
    outs, grads = [out], [dout.to(dtype)]
    if dlse is not None:
        outs.append(lse)
        grads.append(dlse.to(lse.dtype))
    return torch.autograd.grad(outs, (qd, kd, vd), grads)


def max_err(a, b):
    """max |a - b| in fp64, counting equal infinities (lse of masked rows) as no error."""
    a, b = a.double(), b.double()
    d = torch.where(a == b, torch.zeros_like(a), (a - b).abs())
    return d.max().item() if d.numel() else 0.0


ATOL = {torch.float16: 2e-4, torch.bfloat16: 1e-3}
LSE_ATOL = 1e-3
# Gradients are O(1) for the tests' inputs (unit-variance dout): about one ulp at 1.
GRAD_ATOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}
