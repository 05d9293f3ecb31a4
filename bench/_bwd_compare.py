"""The backward half of bench/compare.py: FLOP counts per direction, the gradient check against
an fp32 reference, and the timed callables for each implementation's backward (and forward +
backward). compare.py keeps the grid, the forward, the timers and the output.

How each library's backward is isolated from its forward (direction "bwd"): the forward runs
once, outside the timed region, with q, k, v requiring grad; the timed call is
torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), which runs only the graph's
backward nodes, the forward's saved tensors kept alive by retain_graph:
  ours   flashattn::fwd's autograd node -> flashattn::bwd (one flashattn_backward_ex call; lse is
         unused, so no lse term),
  cuDNN  SDPA's node under SDPBackend.CUDNN_ATTENTION -> _scaled_dot_product_cudnn_attention_backward,
  FA2    SDPA's node under SDPBackend.FLASH_ATTENTION -> _scaled_dot_product_flash_attention_backward,
plus, for the SDPA two, the transposes between FlashAttention's (B, S, H, D) and SDPA's
(B, H, S, D) views, which are views (free) both ways. All three go through the same autograd
call, so the host-side cost is alike too; under --timer graph only the backward's kernels are
captured and replayed. The forward is run on the stream the backward is to be captured on:
autograd launches each backward op on its forward op's stream.

Direction "fwdbwd" times forward and that backward together in one call.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DIRECTIONS = ("fwd", "bwd", "fwdbwd")

# Multiples of the forward's 4*B*H*Sq*Sk*D (2*B*H*Sq*Sk*(D + Dv) when v's head dim Dv differs
# from D): the backward's five matmuls against the forward's two make it 2.5x (FlashAttention's
# convention); forward + backward is 3.5x.
FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5}

GRAD_ATOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}  # as tests/python/_reference.py

SDPA_BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}


def flops(B, H, Sq, Sk, D, causal, direction, Dv=None):
    """FLOPs of one call: the forward's 2*B*H*Sq*Sk*(D + Dv) -- QK^T over q/k's head dim D, PV
    over v's Dv (default D: 4*B*H*Sq*Sk*D exactly) -- halved for causal with Sq == Sk, as the
    forward counts, times FLOP_FACTOR[direction]."""
    Dv = D if Dv is None else Dv
    half = 0.5 if causal and Sq == Sk else 1.0
    return 2 * B * H * Sq * Sk * (D + Dv) * half * FLOP_FACTOR[direction]


# ----------------------------------------------------------------------------- reference

def _ref_grads_chunk(q, k, v, dout, causal, dtype):
    """(dq, dk, dv) in fp32 of sum(dout * attention(q, k, v)) computed in dtype, by autograd;
    q, k are (b, h, S, D) and v, dout (b, h, S, Dv) chunks with equal heads."""
    with torch.enable_grad():
        qd, kd, vd = (t.detach().to(dtype).requires_grad_() for t in (q, k, v))
        Sq, Sk, D = qd.shape[-2], kd.shape[-2], qd.shape[-1]
        s = torch.matmul(qd, kd.transpose(-1, -2)) * (1.0 / math.sqrt(D))
        if causal:
            i = torch.arange(Sq, device=q.device)[:, None]
            j = torch.arange(Sk, device=q.device)[None, :]
            s = s.masked_fill(j > i + (Sk - Sq), float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0).to(dtype)
        out = torch.matmul(p, vd)
        grads = torch.autograd.grad(out, (qd, kd, vd), dout.to(dtype))
    return [g.float() for g in grads]


def grad_errors(grads, q, k, v, dout, causal, budget_bytes=2 << 30):
    """max|g - ref_fp32| for each of (dq, dk, dv) ((B, S, H, D), dv's head dim Dv) and, when
    q's dtype is low precision, the same-dtype naive backward's error next to it; computed in
    (batch, head) chunks so long rows fit in memory. k/v heads are repeated for GQA, and their
    gradients summed back per chunk of whole KV-head groups."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    rep = Hq // Hkv
    per_head = Sq * Sk * 4 * 6  # fp32 scores, probabilities and their gradients, with slack
    hc = max(1, min(Hkv, budget_bytes // (per_head * rep)))  # KV heads per chunk
    errs = {n: 0.0 for n in ("dq", "dk", "dv")}
    low_errs = dict(errs)
    t = [x.transpose(1, 2) for x in (q, k, v, dout)]  # (B, H, S, D) views
    g = [x.transpose(1, 2) for x in grads]
    for b in range(B):
        for h0 in range(0, Hkv, hc):
            h1 = min(Hkv, h0 + hc)
            qs, ds = (x[b:b + 1, h0 * rep:h1 * rep] for x in (t[0], t[3]))
            ks, vs = (x[b:b + 1, h0:h1].repeat_interleave(rep, dim=1) for x in (t[1], t[2]))
            ref = _ref_grads_chunk(qs, ks, vs, ds, causal, torch.float32)
            low = _ref_grads_chunk(qs, ks, vs, ds, causal, q.dtype)
            for i, name in enumerate(("dq", "dk", "dv")):
                r, lo = ref[i], low[i]
                if i:  # back to KV heads: sum each group's query heads
                    r = r.unflatten(1, (h1 - h0, rep)).sum(2)
                    lo = lo.unflatten(1, (h1 - h0, rep)).sum(2)
                    ours = g[i][b:b + 1, h0:h1]
                else:
                    ours = g[i][b:b + 1, h0 * rep:h1 * rep]
                errs[name] = max(errs[name], (ours.float() - r).abs().max().item())
                low_errs[name] = max(low_errs[name], (lo - r).abs().max().item())
            del ref, low
    return errs, low_errs


def check_grads(grads, q, k, v, dout, causal):
    """The tests' rule per gradient: err <= 2 * lowp_err + GRAD_ATOL."""
    errs, low = grad_errors(grads, q, k, v, dout, causal)
    bounds = {n: 2 * low[n] + GRAD_ATOL[q.dtype] for n in errs}
    ok = all(errs[n] <= bounds[n] for n in errs) and not any(
        torch.isnan(x).any().item() for x in grads)
    return {"pass": ok, "grad_err": errs, "grad_bound": bounds}


# ----------------------------------------------------------------------------- timed callables

def _leaves(q, k, v):
    return [t.detach().requires_grad_() for t in (q, k, v)]


def _forward(name, leaves, causal, flashattn, backend, deterministic):
    """out of one implementation's forward on leaves (B, S, H, D), recorded for autograd;
    SDPA's output comes back as a (B, S, H, D) view."""
    if name == "ours":
        return flashattn.flash_attn_func(*leaves, causal=causal, deterministic=deterministic,
                                         backend=backend)
    qt, kt, vt = (t.transpose(1, 2) for t in leaves)
    with sdpa_kernel(SDPA_BACKENDS[name]):
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)


def make_bwd_fn(name, q, k, v, dout, causal, flashattn, backend="auto", deterministic=False,
                stream=None):
    """A callable running only `name`'s backward (see the module doc): the forward runs here,
    once, on `stream` (the stream a CUDA graph will capture on; None = the current one)."""
    leaves = _leaves(q, k, v)
    if stream is not None:
        stream.wait_stream(torch.cuda.current_stream())  # q, k, v, dout were made there
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        out = _forward(name, leaves, causal, flashattn, backend, deterministic)
    if stream is not None:
        torch.cuda.current_stream().wait_stream(stream)

    def run():
        return torch.autograd.grad(out, leaves, dout, retain_graph=True)
    return run


def make_fwdbwd_fn(name, q, k, v, dout, causal, flashattn, backend="auto", deterministic=False):
    """A callable running `name`'s forward and backward, as a training step would."""
    leaves = _leaves(q, k, v)

    def run():
        out = _forward(name, leaves, causal, flashattn, backend, deterministic)
        return torch.autograd.grad(out, leaves, dout)
    return run


def ours_grads(q, k, v, dout, causal, flashattn, backend="auto", deterministic=False):
    """Our (dq, dk, dv), for the check."""
    return make_bwd_fn("ours", q, k, v, dout, causal, flashattn, backend, deterministic)()
