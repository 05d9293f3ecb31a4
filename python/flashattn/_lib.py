"""ctypes binding of the flashattn C ABI (include/flashattn/flashattn_c.h).

Pure Python + ctypes: nothing here imports torch, so users without PyTorch can still
locate the library, read its version and call flashattn_forward_ex / flashattn_backward_ex on
raw device pointers. forward() and resolve_backend() fill a ForwardParams
(flashattn_forward_params_t), backward() and resolve_backward_backend() a BackwardParams
(flashattn_backward_params_t), and pass it to the struct entry points; fields a later header
appends are appended to the mirrors too.

The backward entry points are optional: a library built before them still loads and runs the
forward; has_backward() says whether backward() can be called, backward_unavailable() why not.
The KV-cache entry point (flashattn_kvcache_ex, KvCacheParams, kvcache()) is optional the same
way: has_kvcache() / kvcache_unavailable().

Library search order (first hit wins):
  1. $FLASHATTN_LIBRARY (an explicit path always overrides);
  2. libflashattn.so next to this package (copied there by `pip install ./python`);
  3. the repository's build folder (<repo>/build/libflashattn.so) for in-tree use.
"""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Optional, Sequence

__all__ = [
    "FlashattnTensor", "ForwardParams", "Status", "DType", "Backend", "BACKENDS", "find_library",
    "load_library", "library_version", "last_error", "forward", "resolve_backend", "make_tensor",
    "make_forward_params", "forward_params_size", "raise_for_status", "BackwardParams",
    "make_backward_params", "backward_params_size", "backward", "resolve_backward_backend",
    "has_backward", "backward_unavailable", "KvCacheParams", "make_kvcache_params",
    "kvcache_params_size", "kvcache", "has_kvcache", "kvcache_unavailable",
]

LIBRARY_ENV = "FLASHATTN_LIBRARY"
_LIB_NAMES = ("libflashattn.so", "libflashattn.so.0")


class Status:
    OK = 0
    INVALID_ARGUMENT = 1
    NOT_SUPPORTED = 2
    NO_DEVICE = 3
    CUDA_ERROR = 4
    INTERNAL = 5


class DType:
    FP16 = 0
    BF16 = 1
    FP32 = 2


class Backend:
    AUTO = 0
    SM90 = 1
    SM80 = 2
    REFERENCE = 3


BACKENDS = {"auto": Backend.AUTO, "sm90": Backend.SM90, "sm80": Backend.SM80,
            "reference": Backend.REFERENCE}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}


class FlashattnTensor(ctypes.Structure):
    """flashattn_tensor_t: base pointer, dtype, (B, S, H, D) shape and strides in elements."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("shape", ctypes.c_int64 * 4),
        ("stride", ctypes.c_int64 * 4),
    ]


_I64x4 = ctypes.c_int64 * 4


def _varlen_fields(last: str, last_type=ctypes.c_uint32):
    """The varlen block of the params structs (the same six fields in each; the last word is the
    forward's padding, named after the struct's count of reserved words, and the backward's
    zero_outside_rows)."""
    return [("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
            ("num_seqs", ctypes.c_int32), ("max_seqlen_q", ctypes.c_int32),
            ("max_seqlen_k", ctypes.c_int32), (last, last_type)]


def _feature_fields(reserved: str):
    """The window / softcap / ALiBi block of the params structs (zero = off; window sides stored
    plus one)."""
    return [("window_left_plus1", ctypes.c_int32), ("window_right_plus1", ctypes.c_int32),
            ("softcap", ctypes.c_float), (reserved, ctypes.c_uint32),
            ("alibi_slopes", ctypes.c_void_p), ("alibi_batch_stride", ctypes.c_int64)]


class ForwardParams(ctypes.Structure):
    """flashattn_forward_params_t, field for field (flashattn_c.h). Append only, as the header does.

    ctypes zero-fills a new instance, which is every field's default; struct_size must be set to
    ctypes.sizeof(ForwardParams) (make_forward_params does), so the library knows which fields
    this binding has.
    """
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        # version 1
        ("q", FlashattnTensor),
        ("k", FlashattnTensor),
        ("v", FlashattnTensor),
        ("out", FlashattnTensor),
        ("lse", ctypes.c_void_p),
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("reserved0", ctypes.c_uint32),
        # version 2: packed variable-length batches
        *_varlen_fields("reserved1"),
        # version 3: sliding window, softcap, ALiBi (zero = off; window sides stored plus one)
        *_feature_fields("reserved2"),
    ]


class BackwardParams(ctypes.Structure):
    """flashattn_backward_params_t, field for field (flashattn_c.h). Append only, as the header
    does. Zero-filled like ForwardParams; make_backward_params sets struct_size."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        # version 1
        ("dout", FlashattnTensor),
        ("q", FlashattnTensor),
        ("k", FlashattnTensor),
        ("v", FlashattnTensor),
        ("out", FlashattnTensor),
        ("lse", ctypes.c_void_p),
        ("dq", FlashattnTensor),
        ("dk", FlashattnTensor),
        ("dv", FlashattnTensor),
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        # version 2: the forward's window, softcap and ALiBi (as ForwardParams version 3)
        *_feature_fields("reserved0"),
        # version 3: packed variable-length batches (as ForwardParams version 2), and whether
        # the gradient rows outside every sequence are zeroed
        *_varlen_fields("zero_outside_rows", ctypes.c_int32),
    ]


class KvCacheParams(ctypes.Structure):
    """flashattn_kvcache_params_t, field for field (flashattn_c.h). Append only, as the header
    does. Zero-filled like ForwardParams; make_kvcache_params sets struct_size."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        # version 1
        ("q", FlashattnTensor),
        ("k_cache", FlashattnTensor),
        ("v_cache", FlashattnTensor),
        ("k_new", FlashattnTensor),   # data NULL: no new keys
        ("v_new", FlashattnTensor),
        ("out", FlashattnTensor),
        ("lse", ctypes.c_void_p),
        ("cache_seqlens", ctypes.c_void_p),  # device int32 (B,), or NULL: cache_seqlen for all
        ("block_table", ctypes.c_void_p),    # device int32 (B, max_pages), or NULL: contiguous
        ("block_table_stride", ctypes.c_int64),
        ("cache_seqlen", ctypes.c_int32),
        ("max_pages", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("num_splits", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        # version 2: window, softcap, ALiBi (as ForwardParams' version 3)
        *_feature_fields("reserved0"),
    ]


def make_tensor(data_ptr: int, dtype: int, shape: Sequence[int],
                stride: Sequence[int]) -> FlashattnTensor:
    if len(shape) != 4 or len(stride) != 4:
        raise ValueError("flashattn tensors are 4-D (B, S, H, D)")
    return FlashattnTensor(int(data_ptr) or None, int(dtype), _I64x4(*map(int, shape)), _I64x4(*map(int, stride)))


_INT32_MAX = 2 ** 31 - 1


def _window_plus1(side: int, name: str) -> int:
    """A window side as the C structs store it: plus one, so that 0 (-1 + 1) is "unbounded".
    Values below -1 are passed on for the library to reject by name; a value whose plus-one
    form does not fit an int32 is refused here (ctypes would wrap it silently)."""
    side = int(side)
    if side + 1 > _INT32_MAX:
        raise ValueError(f"{name}: {side} does not fit the library's int32 window (at most "
                         f"{_INT32_MAX - 1}; -1 means unbounded)")
    return max(side + 1, -_INT32_MAX)  # far below -1 stays invalid, without wrapping


def _set_features(p, features) -> None:
    """Write features = (window_left, window_right, softcap, alibi_ptr, alibi_batch_stride) into
    the window / softcap / ALiBi fields of a ForwardParams (v3) or BackwardParams (v2).
    window sides: -1 unbounded, else the number of keys on that side (FlashAttention 2's
    window_size); softcap: 0 = off; alibi_ptr: device fp32 slopes or 0 = off;
    alibi_batch_stride: 0 for (Hq,) slopes shared by the batch, Hq for (B, Hq)."""
    left, right, softcap, alibi_ptr, alibi_stride = features
    p.window_left_plus1 = _window_plus1(left, "window_left")
    p.window_right_plus1 = _window_plus1(right, "window_right")
    p.softcap = float(softcap)
    p.alibi_slopes = int(alibi_ptr) or None
    p.alibi_batch_stride = int(alibi_stride)


def _set_varlen(p, varlen) -> None:
    """Write varlen = (cu_seqlens_q_ptr, cu_seqlens_k_ptr, num_seqs, max_seqlen_q, max_seqlen_k)
    into the varlen fields of a ForwardParams (v2) or BackwardParams (v3)."""
    cu_q, cu_k, n, max_q, max_k = varlen
    p.cu_seqlens_q = int(cu_q) or None
    p.cu_seqlens_k = int(cu_k) or None
    p.num_seqs, p.max_seqlen_q, p.max_seqlen_k = int(n), int(max_q), int(max_k)


def make_forward_params(q: FlashattnTensor, k: FlashattnTensor, v: FlashattnTensor,
                        out: FlashattnTensor, lse_ptr: int = 0, softmax_scale: float = 0.0,
                        causal: bool = False, backend="auto", varlen=None,
                        features=None) -> ForwardParams:
    """A ForwardParams with struct_size set and the given fields. varlen: None (dense) or
    (cu_seqlens_q_ptr, cu_seqlens_k_ptr, num_seqs, max_seqlen_q, max_seqlen_k). features: None
    (no window, softcap or ALiBi) or (window_left, window_right, softcap, alibi_ptr,
    alibi_batch_stride), see _set_features."""
    p = ForwardParams(ctypes.sizeof(ForwardParams), q, k, v, out, int(lse_ptr) or None,
                      float(softmax_scale), 1 if causal else 0, _backend_id(backend), 0)
    if varlen is not None:
        _set_varlen(p, varlen)
    if features is not None:
        _set_features(p, features)
    return p


def make_backward_params(dout: FlashattnTensor, q: FlashattnTensor, k: FlashattnTensor,
                         v: FlashattnTensor, out: FlashattnTensor, lse_ptr: int,
                         dq: FlashattnTensor, dk: FlashattnTensor, dv: FlashattnTensor,
                         softmax_scale: float = 0.0, causal: bool = False,
                         deterministic: bool = False, backend="auto",
                         features=None, varlen=None, zero_outside_rows: bool = False) -> BackwardParams:
    """A BackwardParams with struct_size set and the given fields. features: None or the
    forward's (window_left, window_right, softcap, alibi_ptr, alibi_batch_stride), as in
    make_forward_params; varlen: None (dense) or the forward's (cu_seqlens_q_ptr,
    cu_seqlens_k_ptr, num_seqs, max_seqlen_q, max_seqlen_k); zero_outside_rows (varlen only):
    the library also writes 0 to the gradient rows outside every sequence."""
    p = BackwardParams(ctypes.sizeof(BackwardParams), dout, q, k, v, out, int(lse_ptr) or None,
                       dq, dk, dv, float(softmax_scale), 1 if causal else 0,
                       1 if deterministic else 0, _backend_id(backend))
    if features is not None:
        _set_features(p, features)
    if varlen is not None:
        _set_varlen(p, varlen)
    p.zero_outside_rows = 1 if zero_outside_rows else 0
    return p


def make_kvcache_params(q: FlashattnTensor, k_cache: FlashattnTensor, v_cache: FlashattnTensor,
                        out: FlashattnTensor, k_new: Optional[FlashattnTensor] = None,
                        v_new: Optional[FlashattnTensor] = None, lse_ptr: int = 0,
                        cache_seqlens_ptr: int = 0, cache_seqlen: int = 0,
                        block_table_ptr: int = 0, max_pages: int = 0,
                        block_table_stride: int = 0, softmax_scale: float = 0.0,
                        causal: bool = False, num_splits: int = 0,
                        backend="auto", features=None) -> KvCacheParams:
    """A KvCacheParams with struct_size set and the given fields; k_new / v_new None: no new
    keys (their descriptors stay zero, data NULL)."""
    # Positional: one constructor call (host time per decode step matters).
    p = KvCacheParams(ctypes.sizeof(KvCacheParams), q, k_cache, v_cache,
                      k_new if k_new is not None else FlashattnTensor(),
                      v_new if v_new is not None else FlashattnTensor(), out,
                      int(lse_ptr) or None, int(cache_seqlens_ptr) or None,
                      int(block_table_ptr) or None, int(block_table_stride), int(cache_seqlen),
                      int(max_pages), float(softmax_scale), 1 if causal else 0, int(num_splits),
                      _backend_id(backend))
    if features is not None:  # (window_left, window_right, softcap, alibi_ptr, alibi_batch_stride)
        _set_features(p, features)
    return p


def _candidates():
    env = os.environ.get(LIBRARY_ENV)
    if env:
        yield Path(env), True
    here = Path(__file__).resolve().parent
    for name in _LIB_NAMES:
        yield here / name, False
    repo = here.parent.parent  # <repo>/python/flashattn -> <repo>
    for name in _LIB_NAMES:
        yield repo / "build" / name, False


def find_library() -> Path:
    """Path of libflashattn.so that load_library() would use; FileNotFoundError if none."""
    tried = []
    for path, explicit in _candidates():
        if path.is_file():
            return path
        tried.append(str(path))
        if explicit:
            raise FileNotFoundError(
                f"{LIBRARY_ENV}={path} does not name an existing file")
    raise FileNotFoundError(
        "libflashattn.so not found; build it (cmake --preset default && cmake --build --preset "
        f"default) or set {LIBRARY_ENV}. Looked in: " + ", ".join(tried))


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
# Why backward() cannot run with the loaded library (None: it can). Set by load_library().
_bwd_unavailable: Optional[str] = "libflashattn is not loaded yet"
# Why kvcache() cannot run with the loaded library (None: it can). Set by load_library().
_kvc_unavailable: Optional[str] = "libflashattn is not loaded yet"


def load_library() -> ctypes.CDLL:
    """Load libflashattn once (thread-safe) and declare the C signatures."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(str(find_library()))
        tp = ctypes.POINTER(FlashattnTensor)
        lib.flashattn_forward.argtypes = [tp, tp, tp, tp, ctypes.c_void_p, ctypes.c_float,
                                          ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        lib.flashattn_forward.restype = ctypes.c_int
        lib.flashattn_resolve_backend.argtypes = [tp, tp, tp, tp, ctypes.c_void_p, ctypes.c_float,
                                                  ctypes.c_int, ctypes.c_int,
                                                  ctypes.POINTER(ctypes.c_int)]
        lib.flashattn_resolve_backend.restype = ctypes.c_int
        pp = ctypes.POINTER(ForwardParams)
        lib.flashattn_forward_ex.argtypes = [pp, ctypes.c_void_p]
        lib.flashattn_forward_ex.restype = ctypes.c_int
        lib.flashattn_resolve_backend_ex.argtypes = [pp, ctypes.POINTER(ctypes.c_int)]
        lib.flashattn_resolve_backend_ex.restype = ctypes.c_int
        lib.flashattn_forward_params_size.argtypes = []
        lib.flashattn_forward_params_size.restype = ctypes.c_size_t
        lib.flashattn_last_error.argtypes = []
        lib.flashattn_last_error.restype = ctypes.c_char_p
        lib.flashattn_version.argtypes = []
        lib.flashattn_version.restype = ctypes.c_char_p
        _declare_backward(lib)
        _declare_kvcache(lib)
        _lib = lib
        return lib


def _declare_backward(lib: ctypes.CDLL) -> None:
    """Declare the backward entry points when the library has them, and check the mirror.

    A library built before the backward pass lacks the symbols; it must still load, since the
    forward works, so what is missing is recorded and reported when backward() is called.
    """
    global _bwd_unavailable
    names = ("flashattn_backward_ex", "flashattn_resolve_backward_backend_ex",
             "flashattn_backward_params_size")
    missing = [n for n in names if not hasattr(lib, n)]
    if missing:
        _bwd_unavailable = (f"libflashattn ({lib._name}) has no backward pass: {', '.join(missing)} "
                            f"not exported (a library built before the backward; rebuild it)")
        return
    pp = ctypes.POINTER(BackwardParams)
    lib.flashattn_backward_ex.argtypes = [pp, ctypes.c_void_p]
    lib.flashattn_backward_ex.restype = ctypes.c_int
    lib.flashattn_resolve_backward_backend_ex.argtypes = [pp, ctypes.POINTER(ctypes.c_int)]
    lib.flashattn_resolve_backward_backend_ex.restype = ctypes.c_int
    lib.flashattn_backward_params_size.argtypes = []
    lib.flashattn_backward_params_size.restype = ctypes.c_size_t
    theirs, ours = int(lib.flashattn_backward_params_size()), ctypes.sizeof(BackwardParams)
    # The package and its library ship from one tree, so the two sizes agree unless this mirror
    # was edited wrongly or the library is from another version of the header. Either way the
    # library would read pointers from the wrong offsets: refuse the backward (not the forward)
    # with both numbers rather than hand it a struct it may misread.
    if theirs != ours:
        _bwd_unavailable = (f"libflashattn ({lib._name}) and this binding disagree on "
                            f"flashattn_backward_params_t: the library's is {theirs} bytes, "
                            f"flashattn/_lib.py's BackwardParams {ours}; use a library and "
                            f"package built from the same tree")
        return
    _bwd_unavailable = None


def _declare_kvcache(lib: ctypes.CDLL) -> None:
    """Declare flashattn_kvcache_ex / flashattn_kvcache_params_size when the library has them
    and check KvCacheParams against the library's struct (as _declare_backward does: a library
    without them, or with another struct size, still loads; kvcache() then says why not)."""
    global _kvc_unavailable
    names = ("flashattn_kvcache_ex", "flashattn_kvcache_params_size")
    missing = [n for n in names if not hasattr(lib, n)]
    if missing:
        _kvc_unavailable = (f"libflashattn ({lib._name}) has no KV-cache entry point: "
                            f"{', '.join(missing)} not exported (a library built before it; "
                            f"rebuild it)")
        return
    lib.flashattn_kvcache_ex.argtypes = [ctypes.POINTER(KvCacheParams), ctypes.c_void_p]
    lib.flashattn_kvcache_ex.restype = ctypes.c_int
    lib.flashattn_kvcache_params_size.argtypes = []
    lib.flashattn_kvcache_params_size.restype = ctypes.c_size_t
    theirs, ours = int(lib.flashattn_kvcache_params_size()), ctypes.sizeof(KvCacheParams)
    if theirs != ours:
        _kvc_unavailable = (f"libflashattn ({lib._name}) and this binding disagree on "
                            f"flashattn_kvcache_params_t: the library's is {theirs} bytes, "
                            f"flashattn/_lib.py's KvCacheParams {ours}; use a library and "
                            f"package built from the same tree")
        return
    _kvc_unavailable = None


def kvcache_unavailable() -> Optional[str]:
    """None when kvcache() can run with the loaded library, else why it cannot (loads the
    library; FileNotFoundError when there is none)."""
    load_library()
    return _kvc_unavailable


def has_kvcache() -> bool:
    """True when the library exports flashattn_kvcache_ex and its struct matches
    KvCacheParams."""
    try:
        return kvcache_unavailable() is None
    except OSError:
        return False


def kvcache_params_size() -> int:
    """sizeof(flashattn_kvcache_params_t) as the loaded library was built; NotImplementedError
    when it has no KV-cache entry point."""
    lib = load_library()
    if not hasattr(lib, "flashattn_kvcache_params_size"):
        raise NotImplementedError(f"flashattn_kvcache_params_size: {_kvc_unavailable}")
    return int(lib.flashattn_kvcache_params_size())


def backward_unavailable() -> Optional[str]:
    """None when backward() can run with the loaded library, else why it cannot (loads the
    library; FileNotFoundError when there is none)."""
    load_library()
    return _bwd_unavailable


def has_backward() -> bool:
    """True when the library exports the backward pass and its struct matches BackwardParams."""
    try:
        return backward_unavailable() is None
    except OSError:  # no library at all (FileNotFoundError) or one that cannot be loaded
        return False


def _backward_lib() -> ctypes.CDLL:
    lib = load_library()
    if _bwd_unavailable is not None:
        raise NotImplementedError(f"flashattn_backward_ex: {_bwd_unavailable}")
    return lib


def library_version() -> str:
    """Version string compiled into libflashattn (flashattn_version())."""
    return load_library().flashattn_version().decode()


def forward_params_size() -> int:
    """sizeof(flashattn_forward_params_t) as the loaded library was built."""
    return int(load_library().flashattn_forward_params_size())


def backward_params_size() -> int:
    """sizeof(flashattn_backward_params_t) as the loaded library was built; NotImplementedError
    when it has no backward pass."""
    lib = load_library()
    if not hasattr(lib, "flashattn_backward_params_size"):
        raise NotImplementedError(f"flashattn_backward_params_size: {_bwd_unavailable}")
    return int(lib.flashattn_backward_params_size())


def last_error() -> str:
    """Message of the last failed call on this thread (flashattn_last_error())."""
    msg = load_library().flashattn_last_error()
    return msg.decode(errors="replace") if msg else ""


class FlashAttnCudaError(RuntimeError):
    """A CUDA error reported by libflashattn (status 4)."""


def raise_for_status(rc: int, what: str = "flashattn_forward") -> None:
    """Map a flashattn_status_t to a Python exception carrying the library's message."""
    if rc == Status.OK:
        return
    msg = f"{what}: {last_error()}"
    if rc == Status.INVALID_ARGUMENT:
        raise ValueError(msg)
    if rc == Status.NOT_SUPPORTED:
        raise NotImplementedError(msg)
    if rc == Status.CUDA_ERROR:
        raise FlashAttnCudaError(msg)
    if rc == Status.NO_DEVICE:
        raise RuntimeError(msg)
    raise RuntimeError(f"{msg} (status {rc})")


def _backend_id(backend) -> int:
    if isinstance(backend, str):
        b = BACKENDS.get(backend.lower())
        if b is None:
            raise ValueError(f"backend: unknown name {backend!r} (one of {sorted(BACKENDS)})")
        return b
    return int(backend)


def forward(q: FlashattnTensor, k: FlashattnTensor, v: FlashattnTensor, out: FlashattnTensor,
            lse_ptr: int = 0, softmax_scale: float = 0.0, causal: bool = False,
            backend="auto", stream: int = 0, varlen=None, features=None) -> None:
    """flashattn_forward_ex on raw descriptors; raises on a non-zero status.

    lse_ptr: device pointer to a (B, Hq, Sq) fp32 contiguous buffer ((Hq, total_q) for varlen),
    or 0 for none. softmax_scale: 0 means 1/sqrt(D). stream: a cudaStream_t as an int (0 =
    legacy default). varlen, features: see make_forward_params.
    """
    params = make_forward_params(q, k, v, out, lse_ptr, softmax_scale, causal, backend, varlen,
                                 features)
    rc = load_library().flashattn_forward_ex(ctypes.byref(params), int(stream) or None)
    if rc:
        raise_for_status(rc, "flashattn_forward")


def resolve_backend(q: FlashattnTensor, k: FlashattnTensor, v: FlashattnTensor,
                    out: FlashattnTensor, lse_ptr: int = 0, softmax_scale: float = 0.0,
                    causal: bool = False, backend="auto", features=None) -> str:
    """Name of the backend flashattn_forward would run for these arguments (features: see
    make_forward_params)."""
    params = make_forward_params(q, k, v, out, lse_ptr, softmax_scale, causal, backend,
                                 features=features)
    chosen = ctypes.c_int(-1)
    rc = load_library().flashattn_resolve_backend_ex(ctypes.byref(params), ctypes.byref(chosen))
    raise_for_status(rc, "flashattn_resolve_backend")
    return BACKEND_NAMES.get(chosen.value, str(chosen.value))


def backward(dout: FlashattnTensor, q: FlashattnTensor, k: FlashattnTensor, v: FlashattnTensor,
             out: FlashattnTensor, lse_ptr: int, dq: FlashattnTensor, dk: FlashattnTensor,
             dv: FlashattnTensor, softmax_scale: float = 0.0, causal: bool = False,
             deterministic: bool = False, backend="auto", stream: int = 0,
             features=None, varlen=None, zero_outside_rows: bool = False) -> None:
    """flashattn_backward_ex on raw descriptors; raises on a non-zero status.

    dq, dk, dv are overwritten (dk/dv shaped like k/v; under GQA the library sums each KV head's
    query heads). lse_ptr: the forward's (B, Hq, Sq) fp32 contiguous lse ((Hq, total_q) for
    varlen). softmax_scale, causal, features and varlen (see make_backward_params) must be the
    forward's; a varlen call writes only gradient rows inside its sequences, and 0 to the rows
    outside every sequence too if zero_outside_rows. NotImplementedError when the library has no
    backward pass.
    """
    lib = _backward_lib()
    params = make_backward_params(dout, q, k, v, out, lse_ptr, dq, dk, dv, softmax_scale, causal,
                                  deterministic, backend, features, varlen, zero_outside_rows)
    rc = lib.flashattn_backward_ex(ctypes.byref(params), int(stream) or None)
    if rc:
        raise_for_status(rc, "flashattn_backward")


def resolve_backward_backend(dout: FlashattnTensor, q: FlashattnTensor, k: FlashattnTensor,
                             v: FlashattnTensor, out: FlashattnTensor, lse_ptr: int,
                             dq: FlashattnTensor, dk: FlashattnTensor, dv: FlashattnTensor,
                             softmax_scale: float = 0.0, causal: bool = False,
                             deterministic: bool = False, backend="auto",
                             features=None) -> str:
    """Name of the backend flashattn_backward_ex would run for these arguments (features: see
    make_forward_params)."""
    lib = _backward_lib()
    params = make_backward_params(dout, q, k, v, out, lse_ptr, dq, dk, dv, softmax_scale, causal,
                                  deterministic, backend, features)
    chosen = ctypes.c_int(-1)
    rc = lib.flashattn_resolve_backward_backend_ex(ctypes.byref(params), ctypes.byref(chosen))
    raise_for_status(rc, "flashattn_resolve_backward_backend")
    return BACKEND_NAMES.get(chosen.value, str(chosen.value))


def kvcache(q: FlashattnTensor, k_cache: FlashattnTensor, v_cache: FlashattnTensor,
            out: FlashattnTensor, k_new: Optional[FlashattnTensor] = None,
            v_new: Optional[FlashattnTensor] = None, lse_ptr: int = 0,
            cache_seqlens_ptr: int = 0, cache_seqlen: int = 0, block_table_ptr: int = 0,
            max_pages: int = 0, block_table_stride: int = 0, softmax_scale: float = 0.0,
            causal: bool = False, num_splits: int = 0, backend="auto", stream: int = 0,
            features=None) -> None:
    """flashattn_kvcache_ex on raw descriptors; raises on a non-zero status. features: None or
    (window_left, window_right, softcap, alibi_ptr, alibi_batch_stride), see _set_features.

    k_new / v_new (both or neither) are written into the caches in place at each sequence's
    cache_seqlens, then q attends to the first cache_seqlens + S_new keys (flashattn_c.h).
    cache_seqlens_ptr: device int32 (B,), or 0 to use cache_seqlen for every sequence.
    block_table_ptr: device int32 (B, max_pages) rows block_table_stride elements apart (0 =
    max_pages), or 0 for a contiguous cache. lse_ptr: (B, Hq, Sq) fp32 contiguous or 0.
    stream: a cudaStream_t as an int (0 = legacy default). NotImplementedError when the library
    has no KV-cache entry point.
    """
    lib = load_library()
    if _kvc_unavailable is not None:
        raise NotImplementedError(f"flashattn_kvcache_ex: {_kvc_unavailable}")
    params = make_kvcache_params(q, k_cache, v_cache, out, k_new, v_new, lse_ptr,
                                 cache_seqlens_ptr, cache_seqlen, block_table_ptr, max_pages,
                                 block_table_stride, softmax_scale, causal, num_splits, backend,
                                 features)
    rc = lib.flashattn_kvcache_ex(ctypes.byref(params), int(stream) or None)
    if rc:
        raise_for_status(rc, "flashattn_kvcache")
