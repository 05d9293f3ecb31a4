"""The KV-cache entry point's C ABI mirror (flashattn_kvcache_params_t) through flashattn._lib.
No GPU and no torch needed: struct layout, the library's size, and argument validation (which
happens before the library looks for a device).
"""
import ctypes

import pytest

from flashattn import _lib as c_api


def _have_library():
    try:
        c_api.find_library()
        return True
    except FileNotFoundError:
        return False


needs_lib = pytest.mark.skipif(not _have_library(),
                               reason="libflashattn.so not built (cmake --build --preset default)")
needs_kvcache = pytest.mark.skipif(
    not c_api.has_kvcache(),
    reason="libflashattn has no usable KV-cache entry point here: "
           + str(c_api.kvcache_unavailable() if _have_library() else "no library"))


def _host_tensor(dtype, shape, keep):
    """A descriptor over a 16-byte aligned host buffer (validation never dereferences it)."""
    n = shape[0] * shape[1] * shape[2] * shape[3]
    buf = (ctypes.c_uint16 * (n + 8))()
    keep.append(buf)
    addr = ctypes.addressof(buf)
    addr += (-addr) % 16
    stride = (shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1)
    return c_api.make_tensor(addr, dtype, shape, stride)


def test_kvcache_params_layout_follows_the_header():
    P = c_api.KvCacheParams
    t = ctypes.sizeof(c_api.FlashattnTensor)
    assert t == 80
    assert P.struct_size.offset == 0
    assert [P.q.offset, P.k_cache.offset, P.v_cache.offset, P.k_new.offset, P.v_new.offset,
            P.out.offset] == [8 + i * t for i in range(6)]
    base = 8 + 6 * t
    assert [P.lse.offset, P.cache_seqlens.offset, P.block_table.offset,
            P.block_table_stride.offset] == [base, base + 8, base + 16, base + 24]
    assert [P.cache_seqlen.offset, P.max_pages.offset, P.softmax_scale.offset, P.causal.offset,
            P.num_splits.offset, P.backend.offset] == [base + 32 + 4 * i for i in range(6)]
    # Version 1 ends on an 8-byte boundary at its last field (flashattn_c.h's rule 3).
    assert P.backend.offset + 4 == 544  # version 1 ends here
    assert P.alibi_batch_stride.offset + 8 == ctypes.sizeof(P) == 576  # version 2


@needs_kvcache
def test_kvcache_params_mirror_matches_library():
    assert c_api.kvcache_params_size() == ctypes.sizeof(c_api.KvCacheParams)


def test_make_kvcache_params_sets_size_and_defaults():
    t = c_api.make_tensor(16, c_api.DType.FP16, (1, 4, 2, 64), (512, 128, 64, 1))
    p = c_api.make_kvcache_params(t, t, t, t)
    assert p.struct_size == ctypes.sizeof(c_api.KvCacheParams)
    assert p.k_new.data is None and p.v_new.data is None
    assert (p.lse, p.cache_seqlens, p.block_table, p.block_table_stride, p.cache_seqlen,
            p.max_pages, p.softmax_scale, p.causal, p.num_splits, p.backend) == (
        None, None, None, 0, 0, 0, 0.0, 0, 0, 0)
    p = c_api.make_kvcache_params(t, t, t, t, t, t, 64, 128, 5, 256, 3, 4, 0.5, True, 2, "sm80")
    assert p.k_new.data == 16 and p.v_new.data == 16
    assert (p.lse, p.cache_seqlens, p.block_table, p.block_table_stride, p.cache_seqlen,
            p.max_pages, p.softmax_scale, p.causal, p.num_splits, p.backend) == (
        64, 128, 256, 4, 5, 3, 0.5, 1, 2, c_api.Backend.SM80)
    with pytest.raises(ValueError, match="backend"):
        c_api.make_kvcache_params(t, t, t, t, backend="sm70")


@needs_kvcache
def test_kvcache_validation_errors_are_value_errors():
    keep = []
    q = _host_tensor(c_api.DType.BF16, (2, 1, 4, 64), keep)
    kc = _host_tensor(c_api.DType.BF16, (2, 32, 2, 64), keep)
    kc16 = _host_tensor(c_api.DType.FP16, (2, 32, 2, 64), keep)
    out = _host_tensor(c_api.DType.BF16, (2, 1, 4, 64), keep)
    kn = _host_tensor(c_api.DType.BF16, (2, 3, 2, 64), keep)
    with pytest.raises(ValueError, match="k_cache: dtype differs"):
        c_api.kvcache(q, kc16, kc16, out)
    with pytest.raises(ValueError, match="v_new"):
        c_api.kvcache(q, kc, kc, out, k_new=kn)  # k_new without v_new
    with pytest.raises(ValueError, match="cache_seqlen"):
        c_api.kvcache(q, kc, kc, out, cache_seqlen=31, k_new=kn, v_new=kn)  # 31 + 3 > 32
    with pytest.raises(NotImplementedError, match="reference"):
        c_api.kvcache(q, kc, kc, out, backend="reference")


@needs_kvcache
def test_kvcache_empty_batch_launches_nothing():
    keep = []
    q = _host_tensor(c_api.DType.FP16, (0, 1, 4, 64), keep)
    kc = _host_tensor(c_api.DType.FP16, (0, 32, 2, 64), keep)
    c_api.kvcache(q, kc, kc, q)  # validates, returns OK without a device


def test_kvcache_unavailable_is_reported(monkeypatch):
    class _StandIn:
        _name = "/stand-in/libflashattn.so"

    saved = c_api._kvc_unavailable
    try:
        c_api._declare_kvcache(_StandIn())
        assert "flashattn_kvcache_ex" in c_api._kvc_unavailable
        monkeypatch.setattr(c_api, "load_library", lambda: _StandIn())
        t = c_api.make_tensor(16, c_api.DType.FP16, (1, 4, 2, 64), (512, 128, 64, 1))
        with pytest.raises(NotImplementedError, match="rebuild"):
            c_api.kvcache(t, t, t, t)
    finally:
        c_api._kvc_unavailable = saved
