"""flash_attn_varlen_func: packed variable-length batches (FlashAttention 2's arguments).

q (total_q, nheads, headdim), k / v (total_k, nheads_k, headdim[_v]) hold the sequences one
after another; int32 cu_seqlens_q / cu_seqlens_k (batch + 1 offsets, on q's device) say where
each starts. The offsets never leave the device (no host sync, CUDA-graph safe), so the caller
guarantees them: nondecreasing, starting at 0 or more, each sequence at most max_seqlen_* long.
Offsets that break this give wrong rows, never a read or write outside the tensors. For
debugging, FLASHATTN_CHECK_VARLEN=1 in the environment makes the library check them on every
call (ValueError naming the offset; one host synchronisation per call, none under graph capture).

Sliding window, softcap and ALiBi as flash_attn_func, per sequence (the window and causal are
bottom-right per sequence; (batch, nheads) slopes are indexed by sequence).

Differentiable: flashattn::varlen_fwd's autograd calls flashattn::varlen_bwd (the library's
varlen backward), which returns dq, dk, dv shaped like q, k, v (dk/dv summed over each KV head's
query heads under GQA), zero on rows outside every sequence. The gradient of lse itself is not
supported (NotImplementedError when a loss uses it). With torch < 2.4 (no custom ops) an
autograd.Function runs the same bodies eagerly.
"""
import contextlib
from typing import Tuple

import torch

from . import _lib
from ._torch import (_DOUBLE_BACKWARD, HAS_CUSTOM_OP, _backend_id, _check_alibi, _check_input,
                     _check_window_softcap, _contiguous_slopes, _descriptor, _feature_args,
                     _is_compiling, _lib_features, _lib_strides, _prepared, _refuse_attn_probs,
                     _refuse_dropout, _scale_arg, _trailing_options)


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


def _check_varlen_features(q, cu_seqlens_q, window_left, window_right, softcap, alibi_slopes) -> None:
    """The op bodies' check of the features (also run on fake tensors)."""
    _check_window_softcap((window_left, window_right), softcap)
    _check_alibi(alibi_slopes, q, batch=cu_seqlens_q.numel() - 1)


def _run_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                softmax_scale: float, causal: bool, backend: int, window_left: int = -1,
                window_right: int = -1, softcap: float = 0.0,
                alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor]:
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
                     varlen=varlen,
                     features=_lib_features(q, window_left, window_right, softcap, alibi_slopes, heads_dim=1))
    return out, lse


def _varlen_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                     softmax_scale: float, causal: bool, backend: int,
                     deterministic: bool = False, window_left: int = -1, window_right: int = -1,
                     softcap: float = 0.0, alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """deterministic does nothing here: it is carried for the backward (as flashattn::fwd).
    window_left/right, softcap, alibi_slopes: FlashAttention 2's, off by default."""
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
    _check_varlen_features(q, cu_seqlens_q, window_left, window_right, softcap, alibi_slopes)
    return _run_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                       causal, backend, window_left, window_right, softcap, _contiguous_slopes(alibi_slopes))


def _check_varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k) -> None:
    """What the varlen backward needs beyond the forward's checks (also run on fake tensors)."""
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
    o_shape = (q.size(0), q.size(1), v.size(2))
    for t, name in ((dout, "dout"), (out, "out")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if tuple(t.shape) != o_shape or t.dtype != q.dtype or t.device != q.device:
            raise ValueError(f"{name}: expected the forward output's shape {o_shape}, q's dtype {q.dtype} and "
                             f"device {q.device}, got {tuple(t.shape)}, {t.dtype} on {t.device}")
    want = (q.size(1), q.size(0))
    if (not isinstance(lse, torch.Tensor) or lse.dtype != torch.float32 or tuple(lse.shape) != want
            or lse.device != q.device):
        got = (f"{tuple(lse.shape)} {lse.dtype} on {lse.device}" if isinstance(lse, torch.Tensor)
               else type(lse).__name__)
        raise ValueError(f"lse: expected the varlen forward's (nheads, total_q) = {want} float32 lse on "
                         f"{q.device}, got {got}")


def _run_varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                    max_seqlen_k: int, softmax_scale: float, causal: bool, deterministic: bool,
                    backend: int, window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                    alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv (shaped like q, k, v) on the current stream. The library writes the rows inside
    sequences, and 0 to the others (zero_outside_rows: gradients of rows no output depends on),
    so the gradients need no clearing pass of their own."""
    if q.numel() == 0 or k.numel() == 0:
        return tuple(torch.zeros(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    (do4, d_do), (q4, d_q), (k4, d_k), (v4, d_v), (o4, d_o) = (
        _prepared(t.unsqueeze(0)) for t in (dout, q, k, v, out))
    if not lse.is_contiguous():
        lse = lse.contiguous()
    cu_q, cu_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    dq4, dk4, dv4 = dq.unsqueeze(0), dk.unsqueeze(0), dv.unsqueeze(0)
    dev = q.get_device()
    varlen = (cu_q.data_ptr(), cu_k.data_ptr(), cu_q.numel() - 1, int(max_seqlen_q), int(max_seqlen_k))
    with contextlib.nullcontext() if dev == torch.cuda.current_device() else torch.cuda.device(dev):
        _lib.backward(d_do, d_q, d_k, d_v, d_o, lse.data_ptr(), _descriptor(dq4, _lib_strides(dq4)),
                      _descriptor(dk4, _lib_strides(dk4)), _descriptor(dv4, _lib_strides(dv4)), softmax_scale,
                      causal, deterministic, backend, torch.cuda.current_stream(dev).cuda_stream, varlen=varlen,
                      features=_lib_features(q, window_left, window_right, softcap, alibi_slopes, heads_dim=1),
                      zero_outside_rows=True)
    return dq, dk, dv


def _varlen_bwd_impl(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     out: torch.Tensor, lse: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                     softmax_scale: float, causal: bool, deterministic: bool,
                     backend: int, window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                     alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of sum(dout * out) for out, lse = varlen_fwd(q, k, v, ...) (the same values,
    features included)."""
    _check_varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)
    _check_varlen_features(q, cu_seqlens_q, window_left, window_right, softcap, alibi_slopes)
    return _run_varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale, causal, deterministic, backend, window_left, window_right, softcap,
                           _contiguous_slopes(alibi_slopes))


# deterministic, then the features, last with defaults: graphs and calls that predate them keep
# their meaning.
_FEATURE_SCHEMA = "int window_left=-1, int window_right=-1, float softcap=0.0, Tensor? alibi_slopes=None"
_VARLEN_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
                  "int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal, int backend, "
                  "bool deterministic=False, " + _FEATURE_SCHEMA + ") -> (Tensor, Tensor)")
_VARLEN_BWD_SCHEMA = ("(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
                      "Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, "
                      "float softmax_scale, bool causal, bool deterministic, int backend, "
                      + _FEATURE_SCHEMA + ") -> (Tensor, Tensor, Tensor)")


def _varlen_save(ctx, inputs, output) -> None:
    """setup_context of varlen_fwd: keep what the backward needs."""
    q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale, causal, backend = inputs[:10]
    n = len(inputs)
    deterministic, window_left, window_right, softcap, alibi_slopes = _trailing_options(inputs, 10)
    out, lse = output
    if alibi_slopes is None:
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    else:
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, alibi_slopes)
    ctx.varlen_args = (int(max_q), int(max_k), float(softmax_scale), bool(causal), deterministic,
                       int(backend))
    ctx.varlen_features = (window_left, window_right, softcap)
    ctx.num_inputs = max(n, 10)
    ctx.set_materialize_grads(False)


def _varlen_grads(ctx, grad_out, grad_lse, bwd):
    """Backward of varlen_fwd: gradients for every input it had (q, k, v; None for the rest)."""
    if grad_lse is not None:
        raise NotImplementedError(
            "flash_attn_varlen_func: the gradient of lse (return_lse=True with lse used by the loss) is "
            "not supported for varlen calls; use out only")
    saved = ctx.saved_tensors
    q, k, v, out, lse, cu_q, cu_k = saved[:7]
    alibi_slopes = saved[7] if len(saved) > 7 else None
    max_q, max_k, softmax_scale, causal, deterministic, backend = ctx.varlen_args
    features = _feature_args(*getattr(ctx, "varlen_features", (-1, -1, 0.0)), alibi_slopes)
    if grad_out is None:
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    else:
        dq, dk, dv = bwd(grad_out, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, softmax_scale, causal,
                         deterministic, backend, *features)
    return (dq, dk, dv) + (None,) * (ctx.num_inputs - 3)


if HAS_CUSTOM_OP:
    _varlen_fwd = torch.library.custom_op("flashattn::varlen_fwd", _varlen_fwd_impl, mutates_args=(),
                                          device_types="cuda", schema=_VARLEN_SCHEMA)

    @_varlen_fwd.register_fake
    def _varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale, causal, backend, deterministic=False, window_left=-1,
                         window_right=-1, softcap=0.0, alibi_slopes=None):
        _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
        _check_varlen_features(q, cu_seqlens_q, window_left, window_right, softcap, alibi_slopes)
        return (q.new_empty((q.size(0), q.size(1), v.size(2))),
                q.new_empty((q.size(1), q.size(0)), dtype=torch.float32))

    _varlen_bwd = torch.library.custom_op("flashattn::varlen_bwd", _varlen_bwd_impl, mutates_args=(),
                                          device_types="cuda", schema=_VARLEN_BWD_SCHEMA)

    @_varlen_bwd.register_fake
    def _varlen_bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale, causal, deterministic, backend, window_left=-1, window_right=-1,
                         softcap=0.0, alibi_slopes=None):
        _check_varlen_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)
        _check_varlen_features(q, cu_seqlens_q, window_left, window_right, softcap, alibi_slopes)
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def _varlen_fwd_backward(ctx, grad_out, grad_lse):
        return _varlen_grads(ctx, grad_out, grad_lse, torch.ops.flashattn.varlen_bwd)

    torch.library.register_autograd("flashattn::varlen_fwd", _varlen_fwd_backward, setup_context=_varlen_save)

    def _varlen_double_backward(ctx, *grads):
        raise NotImplementedError(_DOUBLE_BACKWARD)

    torch.library.register_autograd("flashattn::varlen_bwd", _varlen_double_backward,
                                    setup_context=lambda ctx, inputs, output: None)


class _VarlenFunction(torch.autograd.Function):
    """The eager path where the custom ops cannot be registered (torch < 2.4): the op bodies as a
    plain autograd.Function with the same backward."""

    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                backend, deterministic=False, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None):
        inputs = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                  backend, deterministic, window_left, window_right, softcap, alibi_slopes)
        output = _varlen_fwd_impl(*inputs)
        _varlen_save(ctx, inputs, output)
        return output

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        return _varlen_grads(ctx, grad_out, grad_lse, _varlen_bwd_impl)


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
    Differentiable in q, k and v (not through lse): gradients are zero on rows outside every
    sequence; deterministic=True makes them bitwise reproducible.
    window_size, softcap, alibi_slopes: as flash_attn_func, per sequence (window and causal
    bottom-right per sequence; alibi_slopes (nheads,) or (batch, nheads), batch = number of
    sequences). Which kernels serve them depends on the backend and direction: where none does,
    the library falls back to its (slow) reference.
    """
    _refuse_dropout(dropout_p)
    left, right, cap = _check_window_softcap(window_size, softcap)
    _refuse_attn_probs(return_attn_probs)
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
            _scale_arg(softmax_scale), bool(causal), _backend_id(backend))
    # () without features: the op call stays the old one.
    features = _feature_args(left, right, cap, alibi_slopes)
    grad = torch.is_grad_enabled() and isinstance(q, torch.Tensor) and (
        q.requires_grad or k.requires_grad or v.requires_grad)
    if grad:
        if HAS_CUSTOM_OP:
            out, lse = torch.ops.flashattn.varlen_fwd(*args, bool(deterministic), *features)
        else:
            out, lse = _VarlenFunction.apply(*args, bool(deterministic), *features)
    elif HAS_CUSTOM_OP and _is_compiling():
        out, lse = torch.ops.flashattn.varlen_fwd(*args, *((False,) + features if features else ()))
    else:
        out, lse = _varlen_fwd_impl(*args, *((False,) + features if features else ()))
    return (out, lse) if return_lse else out
