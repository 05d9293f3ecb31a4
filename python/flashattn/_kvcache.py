"""flash_attn_with_kvcache: attention against a KV cache (decode), FlashAttention 2's arguments.

q (batch, seqlen_q, nheads, headdim) attends to each sequence's cached keys; new keys/values
k, v (batch, seqlen_new, nheads_k, headdim[_v]), when given, are first written into the cache
in place at cache_seqlens. The cache is contiguous (batch, seqlen_cache, nheads_k, headdim) or
paged (num_blocks, page_block_size, nheads_k, headdim) with an int32 block_table. The caches
are handed to the library as themselves (the append must land in the caller's tensors), so a
cache whose layout the library cannot take is an error, never a silent copy.

Device values (cache_seqlens, block_table) never come back to the host: no sync, CUDA-graph
safe (advance cache_seqlens on the device between replays). They are the caller's contract
(0 <= cache_seqlens[b], cache_seqlens[b] + seqlen_new <= the cache's capacity, block_table
entries name pages of the cache); values that break it give wrong rows, never an access outside
the tensors. Forward only (inference): no autograd.
"""
import contextlib
import operator
from typing import Optional, Tuple

import torch

from . import _lib
from ._torch import (HAS_CUSTOM_OP, _backend_id, _check_alibi, _check_input,
                     _check_window_softcap, _descriptor, _fits, _is_compiling, _lib_strides,
                     _prepared, _scale_arg)

_WHAT = "flash_attn_with_kvcache"


def _refuse_unsupported(rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad) -> None:
    """FlashAttention 2 features this library does not have: refused by name, not ignored
    (ignoring any of them would compute something else)."""
    if rotary_cos is not None or rotary_sin is not None:
        raise NotImplementedError(
            f"{_WHAT}: rotary embedding (rotary_cos / rotary_sin) is not supported by flashattn; "
            f"apply the rotary embedding to q and k before the call and pass rotary_cos=None, "
            f"rotary_sin=None")
    if cache_batch_idx is not None:
        raise NotImplementedError(
            f"{_WHAT}: cache_batch_idx (indexing the cache's batch) is not supported by "
            f"flashattn; pass caches whose batch is q's, or a paged cache with a block_table")
    if cache_leftpad is not None:
        raise NotImplementedError(
            f"{_WHAT}: cache_leftpad (left-padded caches) is not supported by flashattn; only "
            f"cache_leftpad=None")


def _check_index(t, name: str, dim: int, q) -> None:
    """cache_seqlens (dim 1) / block_table (dim 2): int32 on q's device, leading size B."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.int32:
        raise ValueError(f"{name}: expected torch.int32, got {t.dtype} (convert it with "
                         f".to(torch.int32) once, outside the decode loop)")
    if t.device != q.device:
        raise ValueError(f"{name}: on device {t.device}, but q is on {q.device}")
    if t.dim() != dim or t.size(0) != q.size(0):
        want = "(batch,)" if dim == 1 else "(batch, max_blocks_per_seq)"
        raise ValueError(f"{name}: expected shape {want} with batch {q.size(0)}, got "
                         f"{tuple(t.shape)}")


def _check_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, block_table) -> None:
    """Errors reported before anything is launched (also run on fake tensors: no data_ptr)."""
    _check_input(q, "q")
    _check_input(k_cache, "k_cache")
    _check_input(v_cache, "v_cache")
    if (k is None) != (v is None):
        raise ValueError(f"{'v' if v is None else 'k'}: None while "
                         f"{'k' if v is None else 'v'} is given; pass the new keys k and values "
                         f"v together (both or neither)")
    news = ((k, "k"), (v, "v")) if k is not None else ()
    for t, name in news:
        _check_input(t, name)
    for t, name in ((k_cache, "k_cache"), (v_cache, "v_cache")) + news:
        if t.dtype != q.dtype:
            raise ValueError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name}: on device {t.device}, but q is on {q.device}")
    B, _, Hq, D = q.shape
    if k_cache.size(3) != D:
        raise ValueError(f"k_cache: head dim {k_cache.size(3)} differs from q's {D}")
    if tuple(v_cache.shape[:3]) != tuple(k_cache.shape[:3]):
        raise ValueError(f"v_cache: shape {tuple(v_cache.shape)} differs from k_cache's "
                         f"{tuple(k_cache.shape)} outside the head dim")
    if block_table is None and k_cache.size(0) != B:
        raise ValueError(f"k_cache: batch {k_cache.size(0)} differs from q's {B} (a contiguous "
                         f"cache is (batch, seqlen_cache, nheads_k, headdim); pass block_table "
                         f"for a paged one)")
    if cache_seqlens is not None:
        _check_index(cache_seqlens, "cache_seqlens", 1, q)
    if block_table is not None:
        _check_index(block_table, "block_table", 2, q)


def _cache_descriptor(t: torch.Tensor, name: str):
    """The cache as itself: a copy would take the append away from the caller's tensor."""
    s = _lib_strides(t)
    if not _fits(t, s):
        raise ValueError(
            f"{name}: layout the library cannot use in place (shape {tuple(t.shape)}, strides "
            f"{tuple(t.stride())}, address mod 16 = {t.data_ptr() % 16}); it needs a 16-byte "
            f"aligned base and strides that are multiples of 8 elements (headdim stride 1). The "
            f"cache is written in place, so it is not copied: allocate it contiguous")
    return _descriptor(t, s)


def _run_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlen: int, block_table,
                 softmax_scale: float, causal: bool, num_splits: int, backend: int,
                 window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                 alibi_slopes=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The call itself, inputs already checked: allocate out/lse, launch on the current stream."""
    kc_d = _cache_descriptor(k_cache, "k_cache")
    vc_d = _cache_descriptor(v_cache, "v_cache")
    q, q_d = _prepared(q)
    k_d = v_d = None
    if k is not None:
        (k, k_d), (v, v_d) = _prepared(k), _prepared(v)
    seqlens_ptr = 0
    if cache_seqlens is not None:
        if not cache_seqlens.is_contiguous():
            cache_seqlens = cache_seqlens.contiguous()
        seqlens_ptr = cache_seqlens.data_ptr()
    table_ptr = max_pages = table_stride = 0
    if block_table is not None:
        max_pages = block_table.size(1)
        # Rows may be apart (a slice of a wider table): the library takes a row stride.
        row = block_table.stride(0) if block_table.size(0) > 1 else max_pages
        if not ((max_pages <= 1 or block_table.stride(1) == 1) and row >= max_pages):
            block_table = block_table.contiguous()
            row = max_pages
        table_ptr, table_stride = block_table.data_ptr(), row
    B, Sq, Hq, _ = q.shape
    features = None
    if window_left != -1 or window_right != -1 or softcap != 0.0 or alibi_slopes is not None:
        if alibi_slopes is not None and not alibi_slopes.is_contiguous():
            alibi_slopes = alibi_slopes.contiguous()
        features = (window_left, window_right, softcap,
                    alibi_slopes.data_ptr() if alibi_slopes is not None else 0,
                    Hq if alibi_slopes is not None and alibi_slopes.dim() == 2 else 0)
    out = torch.empty((B, Sq, Hq, v_cache.size(3)), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    dev = q.get_device()
    with contextlib.nullcontext() if dev == torch.cuda.current_device() else torch.cuda.device(dev):
        _lib.kvcache(q_d, kc_d, vc_d, _descriptor(out, _lib_strides(out)), k_d, v_d,
                     lse.data_ptr() if lse.numel() else 0, seqlens_ptr, cache_seqlen, table_ptr,
                     max_pages, table_stride, softmax_scale, causal, num_splits, backend,
                     torch.cuda.current_stream(dev).cuda_stream, features=features)
    return out, lse


def _kvcache_impl(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  k: Optional[torch.Tensor], v: Optional[torch.Tensor],
                  cache_seqlens: Optional[torch.Tensor], cache_seqlen: int,
                  block_table: Optional[torch.Tensor], softmax_scale: float, causal: bool,
                  num_splits: int, backend: int, window_left: int = -1, window_right: int = -1,
                  softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse); k_cache / v_cache get k / v at cache_seqlens (cache_seqlen for every sequence
    when cache_seqlens is None)."""
    _check_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, block_table)
    _check_alibi(alibi_slopes, q)
    return _run_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlen, block_table,
                        softmax_scale, causal, num_splits, backend, window_left, window_right,
                        softcap, alibi_slopes)


# Written out (not inferred): the mutation annotations (a!) / (b!) are what tells torch.compile
# that the op writes the caches.
_KVCACHE_SCHEMA = ("(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k, Tensor? v, "
                   "Tensor? cache_seqlens, int cache_seqlen, Tensor? block_table, "
                   "float softmax_scale, bool causal, int num_splits, int backend, "
                   "int window_left=-1, int window_right=-1, float softcap=0.0, "
                   "Tensor? alibi_slopes=None) -> (Tensor, Tensor)")

if HAS_CUSTOM_OP:
    _kvcache_op = torch.library.custom_op("flashattn::kvcache_fwd", _kvcache_impl,
                                          mutates_args=("k_cache", "v_cache"),
                                          device_types="cuda", schema=_KVCACHE_SCHEMA)

    @_kvcache_op.register_fake
    def _kvcache_fake(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlen, block_table,
                      softmax_scale, causal, num_splits, backend, window_left=-1,
                      window_right=-1, softcap=0.0, alibi_slopes=None):
        _check_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, block_table)
        _check_alibi(alibi_slopes, q)
        B, Sq, Hq, _ = q.shape
        return (q.new_empty((B, Sq, Hq, v_cache.size(3))),
                q.new_empty((B, Hq, Sq), dtype=torch.float32))


def _all_tensors(q, k_cache, v_cache, k, v) -> bool:
    """Whether the tensor arguments are tensors (anything else is reported by the checks)."""
    return (isinstance(q, torch.Tensor) and isinstance(k_cache, torch.Tensor)
            and isinstance(v_cache, torch.Tensor) and (k is None or isinstance(k, torch.Tensor))
            and (v is None or isinstance(v, torch.Tensor)))


def _requires_grad(q, k_cache, v_cache, k, v) -> bool:
    # Plain expressions, no generator: this runs under torch.compile's tracing too.
    return (q.requires_grad or k_cache.requires_grad or v_cache.requires_grad
            or (k is not None and k.requires_grad) or (v is not None and v.requires_grad))


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False, *, backend="auto"):
    """Attention of q against a KV cache, appending k / v first; FlashAttention 2's semantics.

    q: (batch, seqlen_q, nheads, headdim). k_cache / v_cache: (batch, seqlen_cache, nheads_k,
    headdim[_v]), or paged (num_blocks, page_block_size, nheads_k, headdim[_v]) with block_table
    (batch, max_blocks_per_seq) int32 (page_block_size a multiple of 16); key j of sequence b is
    then row j % page_block_size of block block_table[b, j // page_block_size]. The caches are
    written in place (never copied: a cache layout the library cannot use is a ValueError).
    k / v: optional new keys/values (batch, seqlen_new, nheads_k, headdim[_v]), written into the
    caches at positions [cache_seqlens[b], cache_seqlens[b] + seqlen_new) of each sequence.
    cache_seqlens: int32 (batch,) on q's device, or a Python int for every sequence, or None for
    the whole cache (then k / v must be None). q then attends to the first cache_seqlens[b] +
    seqlen_new keys; causal masking is bottom-right aligned to that length; a query row with no
    visible key gets out 0 and lse -inf. Cache slots past the visible keys are never read.
    nheads % nheads_k == 0 (GQA/MQA). num_splits: key splits per sequence and KV head (0: a
    heuristic, 1: none). softmax_scale defaults to 1/sqrt(headdim).
    window_size (sliding window against each sequence's visible length, -1 unbounded), softcap
    and alibi_slopes ((nheads,) or (batch, nheads) fp32) as in flash_attn_func.
    rotary_cos, rotary_sin, cache_batch_idx and cache_leftpad exist for FlashAttention 2
    compatibility; any value but their defaults raises NotImplementedError naming the feature
    (rotary_interleaved only matters with rotary).
    Returns out (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse) with softmax_lse
    (batch, nheads, seqlen_q) float32 (natural log) when return_softmax_lse is True.
    Forward only (inference): inputs that require grad with grad enabled raise
    NotImplementedError.
    """
    _refuse_unsupported(rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad)
    window_left, window_right, softcap = _check_window_softcap(window_size, softcap)
    if (torch.is_grad_enabled() and _all_tensors(q, k_cache, v_cache, k, v)
            and _requires_grad(q, k_cache, v_cache, k, v)):
        raise NotImplementedError(
            f"{_WHAT}: no backward (inference only); call it under torch.no_grad() or "
            f"torch.inference_mode(), or detach the inputs")
    cache_seqlen = 0
    if cache_seqlens is None:
        if k is not None or v is not None:
            raise ValueError("cache_seqlens: required when new keys/values (k, v) are given "
                             "(they are written at cache_seqlens)")
        # The whole cache is visible: its capacity (contiguous: seqlen_cache; paged: the table's
        # pages times the page size). Malformed tensors are left to the checks of the call.
        if isinstance(k_cache, torch.Tensor) and k_cache.dim() == 4:
            cache_seqlen = k_cache.size(1)
            if isinstance(block_table, torch.Tensor) and block_table.dim() == 2:
                cache_seqlen *= block_table.size(1)
    elif not isinstance(cache_seqlens, torch.Tensor):
        if isinstance(cache_seqlens, bool) or not hasattr(cache_seqlens, "__index__"):
            raise TypeError(f"cache_seqlens: expected an int32 tensor (batch,) or an int, got "
                            f"{cache_seqlens!r}")
        cache_seqlen = operator.index(cache_seqlens)
        if cache_seqlen < 0:
            raise ValueError(f"cache_seqlens: must be >= 0, got {cache_seqlen}")
        cache_seqlens = None
    args = (q, k_cache, v_cache, k, v, cache_seqlens, int(cache_seqlen), block_table,
            _scale_arg(softmax_scale), bool(causal), int(num_splits), _backend_id(backend))
    if window_left != -1 or window_right != -1 or softcap != 0.0 or alibi_slopes is not None:
        args = args + (window_left, window_right, softcap, alibi_slopes)
    if HAS_CUSTOM_OP and _is_compiling():
        out, lse = torch.ops.flashattn.kvcache_fwd(*args)
    else:
        out, lse = _kvcache_impl(*args)
    return (out, lse) if return_softmax_lse else out
