"""PyTorch binding: the `flashattn::fwd` custom op, its fake (meta) kernel, autograd stub,
and the FlashAttention-style `flash_attn_func` front end.

Imported by flashattn/__init__.py only when torch is importable. Nothing here compiles code;
the op calls libflashattn through ctypes on torch.cuda.current_stream() and never syncs the
host, so it works under torch.compile(fullgraph=True) and inside CUDA-graph capture.

The custom op needs torch >= 2.4 (torch.library.custom_op / register_autograd). With an older
torch (e.g. Debian 12's 1.13) the op is not registered: flash_attn_func then runs eagerly
through a plain torch.autograd.Function (same checks, same launch, same backward error), and
only fwd_op() -- the handle torch.compile and opcheck need -- reports the missing version.
"""

import contextlib
from typing import Tuple, Union

import torch

from . import _lib

__all__ = ["flash_attn_func", "flash_attn_forward", "which_backend", "fwd_op", "HAS_CUSTOM_OP",
           "CUSTOM_OP_MIN_TORCH"]

_DTYPE_IDS = {torch.float16: _lib.DType.FP16, torch.bfloat16: _lib.DType.BF16}

_BACKWARD_MISSING = (
    "flashattn: backward is not implemented yet: libflashattn has no backward kernel "
    "(flashattn_backward / dQ, dK, dV) so flash_attn_func cannot be differentiated. "
    "Run the forward under torch.no_grad() / inference_mode(), or detach q, k and v.")


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


# ----------------------------------------------------------------------------- the op

def _run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
         backend: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The call itself, inputs already checked: allocate out/lse, launch on the current stream."""
    (q, dq), (k, dk), (v, dv) = _prepared(q), _prepared(k), _prepared(v)
    B, Sq, Hq, D = q.shape
    out = torch.empty((B, Sq, Hq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    dev = q.get_device()
    # Switching the current device costs several microseconds per call; only do it when needed.
    with contextlib.nullcontext() if dev == torch.cuda.current_device() else torch.cuda.device(dev):
        _lib.forward(dq, dk, dv, _descriptor(out, _lib_strides(out)), lse.data_ptr() if lse.numel() else 0,
                     softmax_scale, causal, backend, torch.cuda.current_stream(dev).cuda_stream)
    if out.numel() and k.size(1) == 0:
        # No keys: the library validates and returns without writing; every row is fully
        # masked, which by convention gives out = 0 and lse = -inf.
        out.zero_()
        lse.fill_(float("-inf"))
    return out, lse


def _fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
              causal: bool, backend: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """out (B, Sq, Hq, D) in q's dtype and lse (B, Hq, Sq) fp32; softmax_scale 0 = 1/sqrt(D)."""
    _check_group(q, k, v)
    return _run(q, k, v, softmax_scale, causal, backend)


def _backward(ctx, grad_out, grad_lse):
    raise NotImplementedError(_BACKWARD_MISSING)


CUSTOM_OP_MIN_TORCH = "2.4"  # torch.library.custom_op and torch.library.register_autograd

# Both entry points appeared in torch 2.4; an older torch gets the eager path below only.
HAS_CUSTOM_OP = (hasattr(torch.library, "custom_op")
                 and hasattr(torch.library, "register_autograd"))

if HAS_CUSTOM_OP:
    _fwd = torch.library.custom_op("flashattn::fwd", _fwd_impl, mutates_args=(),
                                   device_types="cuda")

    @_fwd.register_fake
    def _fwd_fake(q, k, v, softmax_scale, causal, backend):
        _check_group(q, k, v)
        B, Sq, Hq, D = q.shape
        if k.dim() == 4 and (k.size(3) != D or v.size(3) != D):
            raise ValueError(f"k/v: head dim {k.size(3)}/{v.size(3)} differs from q's {D}")
        return (q.new_empty((B, Sq, Hq, D)),
                q.new_empty((B, Hq, Sq), dtype=torch.float32))

    def _setup_context(ctx, inputs, output):
        pass

    torch.library.register_autograd("flashattn::fwd", _backward, setup_context=_setup_context)


class _FwdFunction(torch.autograd.Function):
    """The eager path where the custom op cannot be registered (torch < 2.4): the op's body as
    a plain autograd.Function, so that outputs of inputs requiring grad carry a grad_fn whose
    backward raises the same NotImplementedError as the op's."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, backend):
        return _fwd_impl(q, k, v, softmax_scale, causal, backend)

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        return _backward(ctx, grad_out, grad_lse)


def _custom_op_missing() -> str:
    return (f"flashattn: the custom op flashattn::fwd (needed for torch.compile and "
            f"torch.library.opcheck) needs torch >= {CUSTOM_OP_MIN_TORCH} "
            f"(torch.library.custom_op and register_autograd); this torch is "
            f"{getattr(torch, '__version__', 'unknown')}, so the op is not registered. "
            f"flash_attn_func still works eagerly (forward only), without the op.")


def fwd_op():
    """torch.ops.flashattn.fwd, the registered custom op (for torch.compile, opcheck, CUDA
    graphs); RuntimeError naming the torch version it needs when this torch cannot register
    it."""
    if not HAS_CUSTOM_OP:
        raise RuntimeError(_custom_op_missing())
    return torch.ops.flashattn.fwd


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


def flash_attn_forward(q, k, v, softmax_scale=None, causal=False, *, backend="auto"):
    """(out, lse) with an explicit backend: "auto" | "sm90" | "sm80" | "reference"."""
    _check_group(q, k, v)
    scale, causal, backend_id = _scale_arg(softmax_scale), bool(causal), _backend_id(backend)
    if not _is_compiling() and not (
            torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        # Plain eager call with nothing to differentiate: the op's own body, without the
        # dispatcher's per-call cost (tens of microseconds, as much as a short kernel).
        return _run(q, k, v, scale, causal, backend_id)
    if HAS_CUSTOM_OP:
        return torch.ops.flashattn.fwd(q, k, v, scale, causal, backend_id)
    # torch < 2.4: no op to trace; autograd still records a node whose backward raises.
    return _FwdFunction.apply(q, k, v, scale, causal, backend_id)


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False, *,
                    backend="auto"):
    """FlashAttention forward with FlashAttention's argument names and layout.

    q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim), with
    nheads % nheads_k == 0 (GQA/MQA); float16 or bfloat16 CUDA tensors whose last dimension has
    stride 1 (other strides are free: views such as packed-qkv slices are used without copies
    when 16-byte aligned with strides that are multiples of 8, and copied otherwise).
    softmax_scale defaults to 1/sqrt(headdim); causal masking is bottom-right aligned.
    Returns out (batch, seqlen_q, nheads, headdim), or (out, lse) with lse
    (batch, nheads, seqlen_q) float32 (natural log) when return_lse is True.
    """
    out, lse = flash_attn_forward(q, k, v, softmax_scale, causal, backend=backend)
    return (out, lse) if return_lse else out


def which_backend(q, k, v, softmax_scale=None, causal=False, backend="auto") -> str:
    """Name of the backend the library would run for these inputs (validates them too)."""
    _check_group(q, k, v)
    (q, dq), (k, dk), (v, dv) = _prepared(q), _prepared(k), _prepared(v)
    with torch.cuda.device(q.device):
        # q stands in for out: same shape and dtype, and resolve_backend writes nothing.
        return _lib.resolve_backend(dq, dk, dv, dq, 0, _scale_arg(softmax_scale), causal, backend)
