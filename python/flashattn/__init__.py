"""flashattn: FlashAttention kernels (libflashattn) for PyTorch and plain ctypes.

    import torch, flashattn
    out = flashattn.flash_attn_func(q, k, v, causal=True)   # q, k, v: (B, S, H, D) fp16/bf16
    out.float().square().mean().backward()                  # dq, dk, dv from the library

Importing compiles nothing and does not need torch: without it, `flashattn.__version__`,
`flashattn.library_version()` and the ctypes layer in `flashattn.c_api` still work. With a
torch older than 2.4 (no torch.library.custom_op) flash_attn_func runs eagerly (forward and
backward) without the custom ops; `flashattn.HAS_CUSTOM_OP` says which, and
`flashattn.fwd_op()` / `flashattn.bwd_op()` return the ops or say which torch they need.
`flashattn.c_api.has_backward()` says whether the loaded library has the backward pass.
"""
__version__ = "0.1.0"

from . import _lib as c_api  # noqa: E402  (pure ctypes, no torch)
from ._lib import find_library, library_version, load_library  # noqa: E402

TORCH_ERROR = None  # why torch could not be used, when it could not (a string), else None

try:
    import torch as _torch  # noqa: F401
except ImportError:  # torch is optional: only the ctypes layer is available
    _torch = None
except Exception as e:  # noqa: BLE001  a broken torch must not take the ctypes layer down
    _torch = None
    TORCH_ERROR = f"import torch failed: {type(e).__name__}: {e}"

if _torch is not None:
    try:
        from ._torch import (CUSTOM_OP_MIN_TORCH, HAS_CUSTOM_OP,  # noqa: E402
                             bwd_op, flash_attn_backward, flash_attn_forward, flash_attn_func,
                             fwd_op, which_backend, which_backward_backend)
        from ._varlen import flash_attn_varlen_func  # noqa: E402
        from ._kvcache import flash_attn_with_kvcache  # noqa: E402
    except Exception as e:  # noqa: BLE001  a torch this binding cannot use: keep the ctypes layer
        import warnings

        TORCH_ERROR = (f"flashattn's torch binding failed to load with torch "
                       f"{getattr(_torch, '__version__', '?')}: {type(e).__name__}: {e}")
        warnings.warn(TORCH_ERROR + "; only the ctypes layer flashattn.c_api is available",
                      RuntimeWarning, stacklevel=2)
        _torch = None

if _torch is not None:
    # Alias kept for callers that spell FlashAttention's private name.
    _flash_attn_forward = flash_attn_forward
    HAS_TORCH = True
else:
    HAS_TORCH = False
    HAS_CUSTOM_OP = False
    CUSTOM_OP_MIN_TORCH = "2.4"  # as in _torch.py, which cannot be imported here

    def _needs_torch(*_args, **_kwargs):
        why = f" ({TORCH_ERROR})" if TORCH_ERROR else ""
        raise ImportError(f"flashattn.flash_attn_func needs PyTorch (pip install torch){why}; the "
                          "ctypes layer flashattn.c_api works without it")

    def fwd_op():
        why = f" ({TORCH_ERROR})" if TORCH_ERROR else ""
        raise ImportError(f"flashattn.fwd_op: the custom op flashattn::fwd needs PyTorch >= "
                          f"{CUSTOM_OP_MIN_TORCH}{why}")

    def bwd_op():
        why = f" ({TORCH_ERROR})" if TORCH_ERROR else ""
        raise ImportError(f"flashattn.bwd_op: the custom op flashattn::bwd needs PyTorch >= "
                          f"{CUSTOM_OP_MIN_TORCH}{why}")

    flash_attn_func = flash_attn_forward = flash_attn_backward = _needs_torch
    which_backend = which_backward_backend = _needs_torch
    _flash_attn_forward = _needs_torch

__all__ = ["__version__", "c_api", "find_library", "library_version", "load_library",
           "flash_attn_func", "flash_attn_forward", "flash_attn_backward", "which_backend",
           "which_backward_backend", "fwd_op", "bwd_op", "HAS_TORCH", "HAS_CUSTOM_OP",
           "CUSTOM_OP_MIN_TORCH", "TORCH_ERROR"]
