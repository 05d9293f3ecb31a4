"""flashattn: FlashAttention forward kernels (libflashattn) for PyTorch and plain ctypes.

    import torch, flashattn
    out = flashattn.flash_attn_func(q, k, v, causal=True)   # q, k, v: (B, S, H, D) fp16/bf16

Importing compiles nothing and does not need torch: without it, `flashattn.__version__`,
`flashattn.library_version()` and the ctypes layer in `flashattn.c_api` still work.
"""
__version__ = "0.1.0"

from . import _lib as c_api  # noqa: E402  (pure ctypes, no torch)
from ._lib import find_library, library_version, load_library  # noqa: E402

try:
    import torch as _torch  # noqa: F401
except ImportError:  # torch is optional: only the ctypes layer is available
    _torch = None

if _torch is not None:
    from ._torch import flash_attn_forward, flash_attn_func, which_backend  # noqa: E402
    # Alias kept for callers that spell FlashAttention's private name.
    _flash_attn_forward = flash_attn_forward
    HAS_TORCH = True
else:
    HAS_TORCH = False

    def _needs_torch(*_args, **_kwargs):
        raise ImportError("flashattn.flash_attn_func needs PyTorch (pip install torch); the "
                          "ctypes layer flashattn.c_api works without it")

    flash_attn_func = flash_attn_forward = which_backend = _flash_attn_forward = _needs_torch

__all__ = ["__version__", "c_api", "find_library", "library_version", "load_library",
           "flash_attn_func", "flash_attn_forward", "which_backend", "HAS_TORCH"]
