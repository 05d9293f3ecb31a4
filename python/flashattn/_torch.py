"""PyTorch binding: the `flashattn::fwd` custom op, its fake (meta) kernel, autograd stub,
and the FlashAttention-style `flash_attn_func` front end.

Imported by flashattn/__init__.py only when torch is importable. Nothing here compiles code;
the op calls libflashattn through ctypes on torch.cuda.current_stream() and never syncs the
host, so it works under torch.compile(fullgraph=True) and inside CUDA-graph capture.
"""

from typing import Tuple, Union

import torch

from . import _lib

__all__ = ["flash_attn_func", "flash_attn_forward", "which_backend"]

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


def _check_group(q, k, v) -> None:
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check_input(t, name)
    for t, name in ((k, "k"), (v, "v")):
        if t.device != q.device:
            raise ValueError(f"{name}: on device {t.device}, but q is on {q.device}")


# ----------------------------------------------------------------------------- launch helpers

def _contig_strides(shape) -> list:
    strides, acc = [0, 0, 0, 0], 1
    for i in range(3, -1, -1):
        strides[i] = acc
        acc *= max(int(shape[i]), 1)
    return strides


def _lib_strides(t: torch.Tensor) -> list:
    """Strides as handed to the library: a size-1 dimension's stride is irrelevant to
    addressing, so it is replaced by the contiguous one (torch leaves arbitrary values there)."""
    cs = _contig_strides(t.shape)
    return [int(t.stride(i)) if t.size(i) > 1 else cs[i] for i in range(4)]


def _fits_library(t: torch.Tensor) -> bool:
    """The library's layout rules: 16-byte aligned base, unit headdim stride, other strides
    multiples of 8 elements. Views that satisfy them (e.g. slices of a packed qkv) go as is."""
    if t.numel() == 0:
        return True
    s = _lib_strides(t)
    return (t.data_ptr() % 16 == 0 and (t.size(3) == 1 or s[3] == 1)
            and all(x % 8 == 0 for x in s[:3]))


def _prepare(t: torch.Tensor) -> torch.Tensor:
    # clone, not .contiguous(): a contiguous tensor with a misaligned storage offset would be
    # returned as is by .contiguous().
    return t if _fits_library(t) else t.clone(memory_format=torch.contiguous_format)


def _descriptor(t: torch.Tensor) -> _lib.FlashattnTensor:
    return _lib.make_tensor(t.data_ptr(), _DTYPE_IDS[t.dtype], t.shape, _lib_strides(t))


def _backend_id(backend: Union[str, int]) -> int:
    return _lib._backend_id(backend)


# ----------------------------------------------------------------------------- the op

def _fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
         causal: bool, backend: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """out (B, Sq, Hq, D) in q's dtype and lse (B, Hq, Sq) fp32; softmax_scale 0 = 1/sqrt(D)."""
    _check_group(q, k, v)
    q, k, v = _prepare(q), _prepare(k), _prepare(v)
    B, Sq, Hq, D = q.shape
    out = torch.empty((B, Sq, Hq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _lib.forward(_descriptor(q), _descriptor(k), _descriptor(v), _descriptor(out),
                     lse.data_ptr() if lse.numel() else 0, float(softmax_scale), bool(causal),
                     int(backend), stream)
        if out.numel() and k.size(1) == 0:
            # No keys: the library validates and returns without writing; every row is fully
            # masked, which by convention gives out = 0 and lse = -inf.
            out.zero_()
            lse.fill_(float("-inf"))
    return out, lse


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


def _backward(ctx, grad_out, grad_lse):
    raise NotImplementedError(_BACKWARD_MISSING)


torch.library.register_autograd("flashattn::fwd", _backward, setup_context=_setup_context)


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
    if not torch.compiler.is_compiling() and not (
            torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        # Plain eager call with nothing to differentiate: the op's own body, without the
        # dispatcher's per-call cost (tens of microseconds, as much as a short kernel).
        return _fwd_impl(q, k, v, scale, causal, backend_id)
    return torch.ops.flashattn.fwd(q, k, v, scale, causal, backend_id)


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
    q, k, v = _prepare(q), _prepare(k), _prepare(v)
    dq = _descriptor(q)
    with torch.cuda.device(q.device):
        # q stands in for out: same shape and dtype, and resolve_backend writes nothing.
        return _lib.resolve_backend(dq, _descriptor(k), _descriptor(v), dq, 0,
                                    _scale_arg(softmax_scale), causal, backend)
