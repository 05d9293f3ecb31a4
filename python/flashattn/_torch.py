"""PyTorch binding: the `flashattn::fwd` and `flashattn::bwd` custom ops, their fake (meta)
kernels, the autograd formula that joins them, and the FlashAttention-style `flash_attn_func`
front end.

Imported by flashattn/__init__.py only when torch is importable. Nothing here compiles code;
the ops call libflashattn through ctypes on torch.cuda.current_stream() and never sync the
host, so they work under torch.compile(fullgraph=True) and inside CUDA-graph capture, forward
and backward.

Autograd: fwd saves q, k, v, out and lse (and the ALiBi slopes when there are any); its
backward calls bwd (dq, dk, dv from the library) and, when lse itself received a gradient, adds
that term too (_lse_grads). `deterministic` is an argument of fwd only so that it reaches the
backward through the recorded graph.

Sliding window, softcap and ALiBi (FlashAttention 2's window_size, softcap, alibi_slopes) are
trailing arguments of both ops with "off" defaults (window -1, -1; softcap 0.0; no slopes), so
calls and graphs that predate them keep their meaning. The Python helpers pass them on only
when one is on (_feature_args), so a call without them is the same call as before.

The custom ops need torch >= 2.4 (torch.library.custom_op / register_autograd). With an older
torch (e.g. Debian 12's 1.13) they are not registered: flash_attn_func then runs eagerly
through a plain torch.autograd.Function (same checks, same launches, same gradients), and only
fwd_op()/bwd_op() -- the handles torch.compile and opcheck need -- report the missing version.
"""

import contextlib
import math
from typing import Tuple, Union

import torch

from . import _lib

__all__ = ["flash_attn_func", "flash_attn_forward", "flash_attn_backward", "which_backend",
           "which_backward_backend", "fwd_op", "bwd_op", "HAS_CUSTOM_OP", "CUSTOM_OP_MIN_TORCH"]

_DTYPE_IDS = {torch.float16: _lib.DType.FP16, torch.bfloat16: _lib.DType.BF16}

_DOUBLE_BACKWARD = (
    "flashattn: double backward (a gradient of the gradients, create_graph=True) is not "
    "supported: flashattn::bwd has no derivative of its own")


# ----------------------------------------------------------------------------- checks

def _check_input(t, name: str) -> None:
    """Errors that must be reported before anything is launched (also run on fake tensors)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 4:
        raise ValueError(f"{name}: expected a 4-D tensor (batch, seqlen, heads, headdim), "
                         f"got shape {tuple(t.shape)}")
    if t.device.type != "cuda":
        raise ValueError(f"{name}: expected a CUDA tensor, got a tensor on '{t.device}' "
                         f"(move it with .cuda())")
    if t.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"{name}: unsupported dtype {t.dtype}; flashattn takes torch.float16 "
                         f"or torch.bfloat16")
    if t.size(-1) > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name}: the headdim (last) dimension must have stride 1, got stride "
                         f"{t.stride(-1)} for shape {tuple(t.shape)}; pass {name}.contiguous()")


def _ok_fast(t) -> bool:
    """The common case of _check_input in one expression (host time per call matters: a short
    kernel takes ~100 us); anything else goes through _check_input for its message."""
    return (isinstance(t, torch.Tensor) and t.is_cuda and t.dim() == 4 and t.dtype in _DTYPE_IDS
            and (t.stride(-1) == 1 or t.size(-1) <= 1))


def _check_group(q, k, v) -> None:
    if not (_ok_fast(q) and _ok_fast(k) and _ok_fast(v)):
        for t, name in ((q, "q"), (k, "k"), (v, "v")):
            _check_input(t, name)
    dev = q.get_device()
    for t, name in ((k, "k"), (v, "v")):
        if t.get_device() != dev:
            raise ValueError(f"{name}: on device {t.device}, but q is on {q.device}")


_INT_TYPES = (int, torch.SymInt) if hasattr(torch, "SymInt") else (int,)


def _is_int(x) -> bool:
    return isinstance(x, _INT_TYPES) and not isinstance(x, bool)


def _check_window_softcap(window_size, softcap) -> Tuple[int, int, float]:
    """(window_left, window_right, softcap) from FlashAttention 2's window_size and softcap, or
    TypeError / ValueError naming the argument. No tensor is looked at (runs before the input
    checks, and under torch.compile's tracing: plain unpacking, no generator or try)."""
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise TypeError(f"window_size: must be a pair of ints (left, right), -1 for an unbounded "
                        f"side, got {window_size!r}")
    left, right = window_size
    if not (_is_int(left) and _is_int(right)):
        raise TypeError(f"window_size: must be a pair of ints (left, right), got {window_size!r}")
    if left < -1 or right < -1:
        raise ValueError(f"window_size: each side must be -1 (unbounded) or >= 0 keys, got "
                         f"{tuple(window_size)!r}")
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)):
        raise TypeError(f"softcap: must be a number (0.0 = off), got {softcap!r}")
    softcap = float(softcap)
    # Comparisons only (no math.isfinite): NaN fails both, inf the second.
    if not (softcap >= 0.0 and softcap < float("inf")):
        raise ValueError(f"softcap: must be finite and >= 0 (0.0 = off), got {softcap}")
    return left, right, softcap


def _check_alibi(alibi_slopes, q, batch=None) -> None:
    """alibi_slopes: None, or a float32 CUDA tensor on q's device shaped (Hq,) or (B, Hq)
    (q already checked; also run on fake tensors). batch None: q is (B, S, Hq, D); else q is a
    packed (total, Hq, D) batch of `batch` sequences."""
    if alibi_slopes is None:
        return
    if not isinstance(alibi_slopes, torch.Tensor):
        raise TypeError(f"alibi_slopes: expected None or a torch.Tensor, got "
                        f"{type(alibi_slopes).__name__}")
    B, Hq = (q.size(0), q.size(2)) if batch is None else (batch, q.size(1))
    if alibi_slopes.dtype != torch.float32:
        raise ValueError(f"alibi_slopes: expected torch.float32 slopes, got {alibi_slopes.dtype}")
    if alibi_slopes.device != q.device:
        raise ValueError(f"alibi_slopes: expected a CUDA tensor on q's device {q.device}, got "
                         f"one on {alibi_slopes.device}")
    shape = tuple(alibi_slopes.shape)
    if shape != (Hq,) and shape != (B, Hq):
        raise ValueError(f"alibi_slopes: expected shape (nheads,) = {(Hq,)} or (batch, nheads) "
                         f"= {(B, Hq)}, got {shape}")


def _check_features(window_size, softcap, alibi_slopes, q) -> tuple:
    """flash_attn_func's window_size, softcap and alibi_slopes, checked against q (already
    checked): () when all are off, else (window_left, window_right, softcap, alibi_slopes) with
    the slopes contiguous -- the trailing arguments _run / the ops take (_feature_args)."""
    left, right, cap = _check_window_softcap(window_size, softcap)
    _check_alibi(alibi_slopes, q)
    if alibi_slopes is not None:
        alibi_slopes = alibi_slopes.contiguous()
    return _feature_args(left, right, cap, alibi_slopes)


def _feature_args(window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None) -> tuple:
    """() when no feature is on, else the four values: what is appended to a call of _run,
    _fwd_impl / _bwd_impl or the ops, so that a call without features stays the old call."""
    if window_left == -1 and window_right == -1 and softcap == 0.0 and alibi_slopes is None:
        return ()
    return (window_left, window_right, softcap, alibi_slopes)


def _lib_features(q: torch.Tensor, window_left: int, window_right: int, softcap: float,
                  alibi_slopes, heads_dim: int = 2):
    """The ctypes layer's features tuple (None: all off) for a launch on q's shape (its heads
    in dimension heads_dim: 2 for (B, S, H, D), 1 for a packed (total, H, D))."""
    if window_left == -1 and window_right == -1 and softcap == 0.0 and alibi_slopes is None:
        return None
    if alibi_slopes is None:
        return (window_left, window_right, softcap, 0, 0)
    # (B, Hq) slopes are contiguous (_check_features / the op bodies), Hq elements apart.
    return (window_left, window_right, softcap, alibi_slopes.data_ptr(),
            q.size(heads_dim) if alibi_slopes.dim() == 2 else 0)


def _contiguous_slopes(alibi_slopes):
    if alibi_slopes is not None and not alibi_slopes.is_contiguous():
        return alibi_slopes.contiguous()
    return alibi_slopes


# ----------------------------------------------------------------------------- launch helpers

def _lib_strides(t: torch.Tensor) -> list:
    """Strides as handed to the library: a size-1 dimension's stride is irrelevant to
    addressing, so it is replaced by the contiguous one (torch leaves arbitrary values there)."""
    shape, stride = t.shape, t.stride()
    out, acc = [0, 0, 0, 0], 1
    for i in (3, 2, 1, 0):
        n = shape[i]
        out[i] = stride[i] if n > 1 else acc
        acc *= n if n > 1 else 1
    return out


def _fits(t: torch.Tensor, s: list) -> bool:
    """The library's layout rules: 16-byte aligned base, unit headdim stride, other strides
    multiples of 8 elements. Views that satisfy them (e.g. slices of a packed qkv) go as is."""
    return (t.numel() == 0 or (t.data_ptr() % 16 == 0 and (s[3] == 1 or t.size(3) == 1)
                               and s[0] % 8 == 0 and s[1] % 8 == 0 and s[2] % 8 == 0))


def _fits_library(t: torch.Tensor) -> bool:
    return _fits(t, _lib_strides(t))


def _descriptor(t: torch.Tensor, strides: list) -> _lib.FlashattnTensor:
    # _lib.make_tensor without its argument checks: shape and strides are already 4 ints here.
    return _lib.FlashattnTensor(t.data_ptr() or None, _DTYPE_IDS[t.dtype], _lib._I64x4(*t.shape),
                                _lib._I64x4(*strides))


def _prepared(t: torch.Tensor):
    """(tensor the library can take, its descriptor): t itself when its layout fits, else a
    contiguous copy."""
    s = _lib_strides(t)
    if not _fits(t, s):
        # clone, not .contiguous(): a contiguous tensor with a misaligned storage offset would be
        # returned as is by .contiguous().
        t = t.clone(memory_format=torch.contiguous_format)
        s = _lib_strides(t)
    return t, _descriptor(t, s)


def _backend_id(backend: Union[str, int]) -> int:
    return _lib._backend_id(backend)


# ----------------------------------------------------------------------------- the forward op

def _run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
         backend: int, window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
         alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The call itself, inputs already checked: allocate out/lse, launch on the current stream.
    window_left/right, softcap, alibi_slopes (contiguous): FlashAttention 2's, off by default."""
    (q, dq), (k, dk), (v, dv) = _prepared(q), _prepared(k), _prepared(v)
    features = _lib_features(q, window_left, window_right, softcap, alibi_slopes)
    B, Sq, Hq, _ = q.shape
    out = torch.empty((B, Sq, Hq, v.size(3)), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    dev = q.get_device()
    # Switching the current device costs several microseconds per call; only do it when needed.
    with contextlib.nullcontext() if dev == torch.cuda.current_device() else torch.cuda.device(dev):
        _lib.forward(dq, dk, dv, _descriptor(out, _lib_strides(out)), lse.data_ptr() if lse.numel() else 0,
                     softmax_scale, causal, backend, torch.cuda.current_stream(dev).cuda_stream,
                     features=features)
    if out.numel() and k.size(1) == 0:
        # No keys: the library validates and returns without writing; every row is fully
        # masked, which by convention gives out = 0 and lse = -inf.
        out.zero_()
        lse.fill_(float("-inf"))
    return out, lse


def _fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
              causal: bool, backend: int, deterministic: bool = False, window_left: int = -1,
              window_right: int = -1, softcap: float = 0.0, alibi_slopes=None
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """out (B, Sq, Hq, Dv) in q's dtype and lse (B, Hq, Sq) fp32; softmax_scale 0 = 1/sqrt(D).
    deterministic does nothing here (the forward always is): it is carried for the backward.
    window_left/right (-1 unbounded), softcap (0 off), alibi_slopes (None off): FA2's."""
    _check_group(q, k, v)
    _check_window_softcap((window_left, window_right), softcap)
    _check_alibi(alibi_slopes, q)
    return _run(q, k, v, softmax_scale, causal, backend,
                *_feature_args(window_left, window_right, softcap,
                               _contiguous_slopes(alibi_slopes)))


# ----------------------------------------------------------------------------- the backward op

def _check_bwd(dout, q, k, v, out, lse) -> None:
    """What the backward needs beyond the forward's checks, before anything is allocated (also
    run on fake tensors). dout's and out's layouts are not checked: whatever the library cannot
    read is copied (_prepared); only what a copy cannot fix is an error."""
    _check_group(q, k, v)
    B, Sq, Hq, _ = q.shape
    o_shape = (B, Sq, Hq, v.size(3))  # out's head dim is v's
    for t, name in ((dout, "dout"), (out, "out")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if tuple(t.shape) != o_shape or t.dtype != q.dtype or t.device != q.device:
            raise ValueError(f"{name}: expected the forward output's shape {o_shape}, q's dtype "
                             f"{q.dtype} and device {q.device}, got {tuple(t.shape)}, {t.dtype} "
                             f"on {t.device}")
    if (not isinstance(lse, torch.Tensor) or lse.dtype != torch.float32
            or tuple(lse.shape) != (B, Hq, Sq) or lse.device != q.device):
        got = (f"{tuple(lse.shape)} {lse.dtype} on {lse.device}" if isinstance(lse, torch.Tensor)
               else type(lse).__name__)
        raise ValueError(f"lse: expected the forward's (batch, nheads, seqlen_q) = {(B, Hq, Sq)} "
                         f"float32 lse on {q.device}, got {got}")


def _run_bwd(dout, q, k, v, out, lse, softmax_scale: float, causal: bool, deterministic: bool,
             backend: int, window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
             alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward call, inputs already checked: allocate dq, dk, dv (shaped like q, k, v: the
    library sums a KV head's query heads under GQA) and launch on the current stream. The
    window, softcap and slopes (contiguous) are the forward's."""
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if q.numel() == 0 or k.numel() == 0:
        # No query sees a key (or there is no query): every gradient is zero, the library's own
        # rule for Sq or Sk = 0, without a launch (nor a library call an older build lacks).
        return dq.zero_(), dk.zero_(), dv.zero_()
    # dout comes from autograd in whatever layout its consumer left (an expanded scalar's grad
    # has stride 0 everywhere, a transpose's is strided): taken as is when the library can read
    # it, copied otherwise. out is ours (contiguous), q/k/v are the forward's inputs.
    (dout, d_do), (q, d_q), (k, d_k), (v, d_v), (out, d_o) = (
        _prepared(dout), _prepared(q), _prepared(k), _prepared(v), _prepared(out))
    if not lse.is_contiguous():
        lse = lse.contiguous()
    features = _lib_features(q, window_left, window_right, softcap, alibi_slopes)
    dev = q.get_device()
    with contextlib.nullcontext() if dev == torch.cuda.current_device() else torch.cuda.device(dev):
        _lib.backward(d_do, d_q, d_k, d_v, d_o, lse.data_ptr(),
                      _descriptor(dq, _lib_strides(dq)), _descriptor(dk, _lib_strides(dk)),
                      _descriptor(dv, _lib_strides(dv)), softmax_scale, causal, deterministic,
                      backend, torch.cuda.current_stream(dev).cuda_stream, features=features)
    return dq, dk, dv


def _bwd_impl(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              out: torch.Tensor, lse: torch.Tensor, softmax_scale: float, causal: bool,
              deterministic: bool, backend: int, window_left: int = -1, window_right: int = -1,
              softcap: float = 0.0, alibi_slopes=None
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of sum(dout * out) for out, lse = fwd(q, k, v, softmax_scale, causal,
    window_left=..., window_right=..., softcap=..., alibi_slopes=...) (the same values)."""
    _check_bwd(dout, q, k, v, out, lse)
    _check_window_softcap((window_left, window_right), softcap)
    _check_alibi(alibi_slopes, q)
    return _run_bwd(dout, q, k, v, out, lse, softmax_scale, causal, deterministic, backend,
                    *_feature_args(window_left, window_right, softcap,
                                   _contiguous_slopes(alibi_slopes)))


# ----------------------------------------------------------------------------- autograd

def _trailing_options(inputs, at: int):
    """(deterministic, window_left, window_right, softcap, alibi_slopes) from an op's inputs, the
    first at position `at`. The dispatcher may drop an argument equal to its default; torch
    fills it back in for setup_context, but not every version did: a missing one is its default."""
    n = len(inputs)
    return (bool(inputs[at]) if n > at else False,
            int(inputs[at + 1]) if n > at + 1 else -1,
            int(inputs[at + 2]) if n > at + 2 else -1,
            float(inputs[at + 3]) if n > at + 3 else 0.0,
            inputs[at + 4] if n > at + 4 else None)


def _save(ctx, inputs, output) -> None:
    """setup_context of fwd: keep what the backward needs."""
    q, k, v, softmax_scale, causal, backend = inputs[:6]
    n = len(inputs)
    deterministic, window_left, window_right, softcap, alibi_slopes = _trailing_options(inputs, 6)
    out, lse = output
    if alibi_slopes is None:
        ctx.save_for_backward(q, k, v, out, lse)
    else:
        ctx.save_for_backward(q, k, v, out, lse, alibi_slopes)
    ctx.attn_args = (float(softmax_scale), bool(causal), bool(deterministic), int(backend))
    ctx.attn_features = (window_left, window_right, softcap)
    # One gradient per input the forward received (never fewer: autograd refuses that; more
    # trailing Nones than an op call had are dropped by it).
    ctx.num_inputs = max(n, 7)
    # An output that no loss used arrives as None instead of a tensor of zeros: lse is rarely
    # used, and its gradient term costs a forward and a backward call (_lse_grads).
    ctx.set_materialize_grads(False)


def _lse_grads(grad_lse, q, k, v, out, lse, softmax_scale, causal, deterministic, backend,
               fwd, bwd, features=()):
    """(dq, dk) in fp32 of sum(grad_lse * lse), from library calls whose meaning is documented
    (nothing here relies on how a kernel uses out or lse internally).

    lse_i = log sum_j exp(s_ij) with s_ij = scale * q_i.k_j, so d lse_i / d s_ij = P_ij and
      dq_i = scale * g_i * sum_j P_ij k_j   -- the forward's output with v := k;
      dk_j = scale * sum_i P_ij g_i q_i     -- the backward's dv for dout_i := scale * g_i * q_i
    (under GQA both sum over a KV head's query heads, as the library's dk/dv do). Both calls
    take v := k (P does not depend on v), so they hold whatever v's own head dim is; the
    backward gets that forward's output pk as its out.

    features (_feature_args: () or window_left, window_right, softcap, alibi_slopes) go to both
    calls. A window only zeroes P_ij, and ALiBi adds a bias that depends on neither q nor k, so
    d s_ij / d q_i is still scale * k_j and the formula holds. A softcap does not (d lse / d s
    gains 1 - tanh^2): _grads refuses that case before calling this.
    """
    scale = softmax_scale if softmax_scale > 0 else 1.0 / math.sqrt(q.size(-1))
    g = (grad_lse.to(torch.float32) * scale).transpose(1, 2).unsqueeze(-1)  # (B, Sq, Hq, 1)
    # fwd's 7th argument is deterministic, the features follow it.
    fwd_extra = (deterministic,) + tuple(features) if features else ()
    pk, _ = fwd(q, k, k, softmax_scale, causal, backend, *fwd_extra)
    dq = g * pk.to(torch.float32)
    _, _, dk = bwd((g * q.to(torch.float32)).to(q.dtype), q, k, k, pk, lse, softmax_scale,
                   causal, deterministic, backend, *features)
    return dq, dk.to(torch.float32)


def _grads(ctx, grad_out, grad_lse, fwd, bwd):
    """Backward of fwd: gradients for (q, k, v, softmax_scale, causal, backend, deterministic,
    window_left, window_right, softcap, alibi_slopes) -- as many as the forward had inputs.
    fwd/bwd are the ops (custom-op path, traceable) or their bodies (eager path)."""
    saved = ctx.saved_tensors
    q, k, v, out, lse = saved[:5]
    alibi_slopes = saved[5] if len(saved) > 5 else None
    softmax_scale, causal, deterministic, backend = ctx.attn_args
    window_left, window_right, softcap = getattr(ctx, "attn_features", (-1, -1, 0.0))
    features = _feature_args(window_left, window_right, softcap, alibi_slopes)
    if grad_lse is not None and softcap > 0.0:
        raise NotImplementedError(
            f"flashattn: the gradient of lse (return_lse=True with lse used by the loss) is not "
            f"supported with softcap > 0 (softcap={softcap}): d lse / d score needs the "
            f"softcap's derivative, which the library's calls do not provide. Use out only, "
            f"or softcap=0.0")
    dq = dk = dv = None
    if grad_out is not None:
        dq, dk, dv = bwd(grad_out, q, k, v, out, lse, softmax_scale, causal, deterministic,
                         backend, *features)
    if grad_lse is not None:
        lq, lk = _lse_grads(grad_lse, q, k, v, out, lse, softmax_scale, causal, deterministic,
                            backend, fwd, bwd, features)
        # Summed in fp32, rounded once.
        dq = (lq if dq is None else dq.to(torch.float32) + lq).to(q.dtype)
        dk = (lk if dk is None else dk.to(torch.float32) + lk).to(k.dtype)
        if dv is None:
            dv = torch.zeros_like(v)  # lse does not depend on v
    return (dq, dk, dv) + (None,) * (getattr(ctx, "num_inputs", 7) - 3)


def _double_backward(ctx, *grads):
    raise NotImplementedError(_DOUBLE_BACKWARD)


CUSTOM_OP_MIN_TORCH = "2.4"  # torch.library.custom_op and torch.library.register_autograd

# Both entry points appeared in torch 2.4; an older torch gets the eager path below only.
HAS_CUSTOM_OP = (hasattr(torch.library, "custom_op")
                 and hasattr(torch.library, "register_autograd"))

# Explicit schemas rather than inferred ones: deterministic's default must be part of fwd's
# schema (callers and graphs that predate it pass six arguments), and a written schema does not
# depend on which defaults a given torch's inference understands. The window / softcap / ALiBi
# arguments come last with "off" defaults for the same reason (six/seven-argument fwd calls and
# ten-argument bwd calls keep working).
_FEATURES_SCHEMA = ("int window_left=-1, int window_right=-1, float softcap=0.0, "
                    "Tensor? alibi_slopes=None")
_FWD_SCHEMA = ("(Tensor q, Tensor k, Tensor v, float softmax_scale, bool causal, int backend, "
               "bool deterministic=False, " + _FEATURES_SCHEMA + ") -> (Tensor, Tensor)")
_BWD_SCHEMA = ("(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
               "float softmax_scale, bool causal, bool deterministic, int backend, "
               + _FEATURES_SCHEMA + ") -> (Tensor, Tensor, Tensor)")

if HAS_CUSTOM_OP:
    _fwd = torch.library.custom_op("flashattn::fwd", _fwd_impl, mutates_args=(),
                                   device_types="cuda", schema=_FWD_SCHEMA)

    @_fwd.register_fake
    def _fwd_fake(q, k, v, softmax_scale, causal, backend, deterministic=False, window_left=-1,
                  window_right=-1, softcap=0.0, alibi_slopes=None):
        _check_group(q, k, v)
        _check_window_softcap((window_left, window_right), softcap)
        _check_alibi(alibi_slopes, q)
        B, Sq, Hq, D = q.shape
        if k.size(3) != D:
            raise ValueError(f"k: head dim {k.size(3)} differs from q's {D}")
        return (q.new_empty((B, Sq, Hq, v.size(3))),
                q.new_empty((B, Hq, Sq), dtype=torch.float32))

    _bwd = torch.library.custom_op("flashattn::bwd", _bwd_impl, mutates_args=(),
                                   device_types="cuda", schema=_BWD_SCHEMA)

    @_bwd.register_fake
    def _bwd_fake(dout, q, k, v, out, lse, softmax_scale, causal, deterministic, backend,
                  window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None):
        _check_bwd(dout, q, k, v, out, lse)
        _check_window_softcap((window_left, window_right), softcap)
        _check_alibi(alibi_slopes, q)
        # Contiguous, as _run_bwd allocates them.
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def _fwd_backward(ctx, grad_out, grad_lse):
        return _grads(ctx, grad_out, grad_lse, torch.ops.flashattn.fwd, torch.ops.flashattn.bwd)

    torch.library.register_autograd("flashattn::fwd", _fwd_backward, setup_context=_save)
    # bwd is not differentiable; say so instead of torch's generic "no autograd formula".
    torch.library.register_autograd("flashattn::bwd", _double_backward,
                                    setup_context=lambda ctx, inputs, output: None)


class _FwdFunction(torch.autograd.Function):
    """The eager path where the custom ops cannot be registered (torch < 2.4): the op's body as
    a plain autograd.Function with the same backward (the op bodies instead of the ops)."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, backend, deterministic=False, *features):
        # features: () or (window_left, window_right, softcap, alibi_slopes), as _feature_args;
        # apply() gets them only when one is on, so a call without them is the old call.
        output = _fwd_impl(q, k, v, softmax_scale, causal, backend,
                           *((deterministic,) + features if features else ()))
        _save(ctx, (q, k, v, softmax_scale, causal, backend, deterministic) + features, output)
        return output

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        return _grads(ctx, grad_out, grad_lse, _fwd_impl, _bwd_impl)


def _custom_op_missing(name: str = "fwd") -> str:
    return (f"flashattn: the custom op flashattn::{name} (needed for torch.compile and "
            f"torch.library.opcheck) needs torch >= {CUSTOM_OP_MIN_TORCH} "
            f"(torch.library.custom_op and register_autograd); this torch is "
            f"{getattr(torch, '__version__', 'unknown')}, so the op is not registered. "
            f"flash_attn_func still works eagerly (forward and backward), without the op.")


def fwd_op():
    """torch.ops.flashattn.fwd, the registered custom op (for torch.compile, opcheck, CUDA
    graphs); RuntimeError naming the torch version it needs when this torch cannot register
    it."""
    if not HAS_CUSTOM_OP:
        raise RuntimeError(_custom_op_missing("fwd"))
    return torch.ops.flashattn.fwd


def bwd_op():
    """torch.ops.flashattn.bwd(dout, q, k, v, out, lse, softmax_scale, causal, deterministic,
    backend, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None) -> (dq, dk, dv),
    the backward custom op; RuntimeError as fwd_op() on an old torch."""
    if not HAS_CUSTOM_OP:
        raise RuntimeError(_custom_op_missing("bwd"))
    return torch.ops.flashattn.bwd


def _find_is_compiling():
    """torch.compiler.is_compiling where it exists (torch >= 2.3), torch._dynamo's before it;
    a torch without either cannot compile, so the answer there is always False."""
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if fn is None:
        fn = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return fn if fn is not None else (lambda: False)


_is_compiling = _find_is_compiling()


# ----------------------------------------------------------------------------- front ends

def _scale_arg(softmax_scale) -> float:
    if softmax_scale is None:
        return 0.0  # the library's default, 1/sqrt(D)
    s = float(softmax_scale)
    if not s > 0.0:
        raise ValueError(f"softmax_scale: must be > 0 (None means 1/sqrt(headdim)), got {s}")
    return s


def flash_attn_forward(q, k, v, softmax_scale=None, causal=False, *, deterministic=False,
                       backend="auto", window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
    """(out, lse) with an explicit backend: "auto" | "sm90" | "sm80" | "reference".
    Differentiable; deterministic=True makes the backward bitwise reproducible. window_size,
    softcap, alibi_slopes: as flash_attn_func."""
    _check_group(q, k, v)
    scale, causal, backend_id = _scale_arg(softmax_scale), bool(causal), _backend_id(backend)
    deterministic = bool(deterministic)
    # () when every feature is off: then each call below is exactly the call it was before them.
    feats = _check_features(window_size, softcap, alibi_slopes, q)
    if not _is_compiling() and not (
            torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        # Plain eager call with nothing to differentiate: the op's own body, without the
        # dispatcher's per-call cost (tens of microseconds, as much as a short kernel).
        return _run(q, k, v, scale, causal, backend_id, *feats)
    if HAS_CUSTOM_OP:
        return torch.ops.flashattn.fwd(q, k, v, scale, causal, backend_id, deterministic, *feats)
    # torch < 2.4: no op to trace; autograd records the Function's node instead.
    return _FwdFunction.apply(q, k, v, scale, causal, backend_id, deterministic, *feats)


def flash_attn_backward(dout, q, k, v, out, lse, softmax_scale=None, causal=False, *,
                        deterministic=False, backend="auto", window_size=(-1, -1), softcap=0.0,
                        alibi_slopes=None):
    """(dq, dk, dv), new tensors, of sum(dout * out) from the forward's out and lse, without
    autograd (e.g. to time or test the backward alone). softmax_scale, causal, window_size,
    softcap and alibi_slopes must be the forward's; dk/dv are shaped like k/v (summed over each
    KV head's query heads under GQA)."""
    args = (dout, q, k, v, out, lse, _scale_arg(softmax_scale), bool(causal),
            bool(deterministic), _backend_id(backend))
    left, right, cap = _check_window_softcap(window_size, softcap)
    if alibi_slopes is not None:
        _check_group(q, k, v)  # q's device and shape are what the slopes are checked against
        _check_alibi(alibi_slopes, q)
        alibi_slopes = alibi_slopes.contiguous()
    args += _feature_args(left, right, cap, alibi_slopes)
    if HAS_CUSTOM_OP and _is_compiling():
        return torch.ops.flashattn.bwd(*args)
    return _bwd_impl(*args)


def _refuse_dropout(dropout_p) -> None:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(
            f"flash_attn_func: dropout_p must be a number, got {dropout_p!r}. The 4th positional "
            f"argument is dropout_p, as in FlashAttention 2: pass softmax_scale and causal by "
            f"keyword")
    if dropout_p != 0:
        raise NotImplementedError(
            f"flash_attn_func: attention dropout (dropout_p={dropout_p}) is not supported by "
            f"flashattn; pass dropout_p=0.0 (e.g. only in eval) or apply dropout outside")


def _refuse_attn_probs(return_attn_probs) -> None:
    if return_attn_probs:
        raise NotImplementedError(
            "flash_attn_func: return_attn_probs=True (the attention probabilities, a testing "
            "aid of FlashAttention 2's dropout) is not supported by flashattn; use "
            "return_lse=True for the log-sum-exp")


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False, return_lse=False, *, backend="auto"):
    """FlashAttention with FlashAttention 2's arguments, layout and autograd.

    q: (batch, seqlen_q, nheads, headdim); k: (batch, seqlen_k, nheads_k, headdim); v: (batch,
    seqlen_k, nheads_k, headdim_v), with nheads % nheads_k == 0 (GQA/MQA); headdim and headdim_v
    any multiples of 8 up to 256 (they may differ, e.g. 192 and 128); float16 or bfloat16 CUDA tensors whose last dimension has
    stride 1 (other strides are free: views such as packed-qkv slices are used without copies
    when 16-byte aligned with strides that are multiples of 8, and copied otherwise).
    softmax_scale defaults to 1/sqrt(headdim); causal masking is bottom-right aligned.
    deterministic=True makes the backward's dq, dk, dv bitwise reproducible (run to run and
    stream to stream), at some speed; the forward always is.
    window_size=(left, right): sliding-window (local) attention, FlashAttention 2's meaning:
    query i sees key j iff i + Sk - Sq - left <= j <= i + Sk - Sq + right, -1 leaving that
    side unbounded; with causal=True the window is intersected with the causal mask. A query
    that sees no key gets out 0 and lse -inf (and no gradient).
    softcap > 0: each scaled score s becomes softcap * tanh(s / softcap) (0.0 = off). The lse's
    own gradient is not available with a softcap (NotImplementedError when a loss uses lse).
    alibi_slopes: float32 CUDA tensor (nheads,) or (batch, nheads); the score of (i, j) gains
    -slope * |i + Sk - Sq - j| (after the scale and the softcap). Not differentiated.
    The backward takes the same window, softcap and slopes. Which kernels serve them depends
    on the backend: where none does, the library falls back to its (slow) reference.
    dropout_p and return_attn_probs exist for FlashAttention 2 compatibility; any value but
    their defaults raises NotImplementedError naming the feature.
    Returns out (batch, seqlen_q, nheads, headdim_v), or (out, lse) with lse
    (batch, nheads, seqlen_q) float32 (natural log) when return_lse is True; gradients flow
    back through both.
    """
    _refuse_dropout(dropout_p)
    # Checked before the tensors (as the refusals were): a bad window or softcap names itself
    # whatever q is. alibi_slopes is checked against q in flash_attn_forward.
    _check_window_softcap(window_size, softcap)
    _refuse_attn_probs(return_attn_probs)
    out, lse = flash_attn_forward(q, k, v, softmax_scale, causal, deterministic=deterministic,
                                  backend=backend, window_size=window_size, softcap=softcap,
                                  alibi_slopes=alibi_slopes)
    return (out, lse) if return_lse else out


def _resolve_features(q, window_size, softcap, alibi_slopes):
    """(features for the ctypes layer, slopes tensor to keep alive) for which_*backend."""
    feats = _check_features(window_size, softcap, alibi_slopes, q)
    if not feats:
        return None, None
    return _lib_features(q, *feats), feats[3]


def which_backend(q, k, v, softmax_scale=None, causal=False, backend="auto", *,
                  window_size=(-1, -1), softcap=0.0, alibi_slopes=None) -> str:
    """Name of the backend the library would run for these inputs (validates them too);
    window_size, softcap, alibi_slopes as flash_attn_func."""
    _check_group(q, k, v)
    features, _slopes = _resolve_features(q, window_size, softcap, alibi_slopes)
    (q, dq), (k, dk), (v, dv) = _prepared(q), _prepared(k), _prepared(v)
    # resolve_backend writes nothing: out's descriptor only needs the right shape and layout.
    out = torch.empty((q.size(0), q.size(1), q.size(2), v.size(3)), dtype=q.dtype, device=q.device)
    with torch.cuda.device(q.device):
        return _lib.resolve_backend(dq, dk, dv, _prepared(out)[1], 0, _scale_arg(softmax_scale),
                                    causal, backend, features=features)


def which_backward_backend(q, k, v, softmax_scale=None, causal=False, deterministic=False,
                           backend="auto", *, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None) -> str:
    """Name of the backend the library's backward would run for these inputs (window_size,
    softcap, alibi_slopes: the forward's, as flash_attn_func)."""
    _check_group(q, k, v)
    features, _slopes = _resolve_features(q, window_size, softcap, alibi_slopes)
    (q, qd), (k, kd), (v, vd) = _prepared(q), _prepared(k), _prepared(v)
    lse = torch.empty((q.size(0), q.size(2), q.size(1)), dtype=torch.float32, device=q.device)
    # The gradients must not overlap any input (the library checks), so they get their own
    # (never touched) buffers; one out-shaped buffer stands in for dout and out, which may
    # alias each other. (The tensors stay referenced until the call returns: a freed one's
    # memory would be the next one's.)
    bufs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v)]
    grads = [_prepared(t)[1] for t in bufs]
    out = torch.empty((q.size(0), q.size(1), q.size(2), v.size(3)), dtype=q.dtype, device=q.device)
    od = _prepared(out)[1]
    with torch.cuda.device(q.device):
        return _lib.resolve_backward_backend(od, qd, kd, vd, od, lse.data_ptr(), *grads,
                                             _scale_arg(softmax_scale), causal, deterministic,
                                             backend, features=features)
