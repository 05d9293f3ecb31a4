"""flash_attn_varlen_func: packed variable-length batches (FlashAttention 2's arguments).

q (total_q, nheads, headdim), k / v (total_k, nheads_k, headdim[_v]) hold the sequences one
after another; int32 cu_seqlens_q / cu_seqlens_k (batch + 1 offsets, on q's device) say where
each starts. The offsets never leave the device (no host sync, CUDA-graph safe), so the caller
guarantees them: nondecreasing, starting at 0 or more, each sequence at most max_seqlen_* long.
Offsets that break this give wrong rows, never a read or write outside the tensors.
"""
import contextlib
from typing import Tuple

import torch

from . import _lib
from ._torch import (HAS_CUSTOM_OP, _backend_id, _check_input, _descriptor, _is_compiling,
                     _lib_strides, _prepared, _refuse_unsupported, _scale_arg)


def _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k) -> None:
    """Errors reported before anything is launched (also run on fake tensors)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(f"{name}: a varlen call takes packed 3-D tensors (total_tokens, heads, "
                             f"headdim), got shape {tuple(t.shape)}")
        _check_input(t.unsqueeze(0), name)
    for t, name in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 1 or t.numel() < 1:
            raise ValueError(f"{name}: expected a 1-D tensor of batch + 1 offsets, got shape "
                             f"{tuple(t.shape)}")
        if t.dtype != torch.int32:
            raise ValueError(f"{name}: expected torch.int32 offsets, got {t.dtype}")
    if cu_seqlens_q.numel() != cu_seqlens_k.numel():
        raise ValueError(f"cu_seqlens_k: {cu_seqlens_k.numel()} offsets, but cu_seqlens_q has "
                         f"{cu_seqlens_q.numel()} (both are batch + 1)")
    dev = q.device
    for t, name in ((k, "k"), (v, "v"), (cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k")):
        if t.device != dev:
            raise ValueError(f"{name}: on device {t.device}, but q is on {dev}")


def _run_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                softmax_scale: float, causal: bool, backend: int) -> Tuple[torch.Tensor, torch.Tensor]:
    (q4, dq), (k4, dk), (v4, dv) = (_prepared(t.unsqueeze(0)) for t in (q, k, v))
    cu_q, cu_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    total_q, hq = q.size(0), q.size(1)
    out = torch.empty((total_q, hq, v.size(2)), dtype=q.dtype, device=q.device)
    lse = torch.empty((hq, total_q), dtype=torch.float32, device=q.device)
    out4 = out.unsqueeze(0)
    dev = q.get_device()
    varlen = (cu_q.data_ptr(), cu_k.data_ptr(), cu_q.numel() - 1, int(max_seqlen_q), int(max_seqlen_k))
    with contextlib.nullcontext() if dev == torch.cuda.current_device() else torch.cuda.device(dev):
        _lib.forward(dq, dk, dv, _descriptor(out4, _lib_strides(out4)), lse.data_ptr() if lse.numel() else 0,
                     softmax_scale, causal, backend, torch.cuda.current_stream(dev).cuda_stream,
                     varlen=varlen)
    return out, lse


def _varlen_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                     softmax_scale: float, causal: bool, backend: int) -> Tuple[torch.Tensor, torch.Tensor]:
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
    return _run_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                       causal, backend)


_VARLEN_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
                  "int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal, int backend) "
                  "-> (Tensor, Tensor)")

if HAS_CUSTOM_OP:
    _varlen_fwd = torch.library.custom_op("flashattn::varlen_fwd", _varlen_fwd_impl, mutates_args=(),
                                          device_types="cuda", schema=_VARLEN_SCHEMA)

    @_varlen_fwd.register_fake
    def _varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale, causal, backend):
        _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
        return (q.new_empty((q.size(0), q.size(1), v.size(2))),
                q.new_empty((q.size(1), q.size(0)), dtype=torch.float32))


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, return_lse=False, *, backend="auto"):
    """Attention over a packed batch of variable-length sequences, FlashAttention 2's semantics.

    q (total_q, nheads, headdim), k (total_k, nheads_k, headdim), v (total_k, nheads_k,
    headdim_v); cu_seqlens_q / cu_seqlens_k int32 (batch + 1,) on q's device: sequence i owns rows
    [cu[i], cu[i+1]) (zero-length sequences allowed); max_seqlen_q / max_seqlen_k bound their
    lengths. Causal is bottom-right aligned per sequence. Returns out (total_q, nheads,
    headdim_v) (rows past cu_seqlens_q[-1] are left unwritten), or (out, lse) with lse (nheads,
    total_q) float32 when return_lse is True.
    Forward only for now: with inputs that require grad (and grad enabled) it raises
    NotImplementedError instead of returning something that cannot be differentiated.
    """
    _refuse_unsupported(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise NotImplementedError(
            "flash_attn_varlen_func: the varlen backward is not implemented yet; call it under "
            "torch.no_grad() (inference), or use flash_attn_func on padded batches for training")
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
            _scale_arg(softmax_scale), bool(causal), _backend_id(backend))
    if HAS_CUSTOM_OP and _is_compiling():
        out, lse = torch.ops.flashattn.varlen_fwd(*args)
    else:
        out, lse = _varlen_fwd_impl(*args)
    return (out, lse) if return_lse else out
