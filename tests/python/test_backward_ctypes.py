"""The backward's C ABI mirror (flashattn_backward_params_t) and how the ctypes layer copes with
a library that has no backward pass. No GPU and no torch needed: struct layout, argument
validation and symbol lookup all happen before the library looks for a device.
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
needs_bwd_symbol = pytest.mark.skipif(
    not c_api.has_backward(),
    reason="libflashattn has no usable backward pass here: "
           + str(c_api.backward_unavailable() if _have_library() else "no library"))


def _tensor(shape=(1, 4, 2, 64), ptr=0):
    B, S, H, D = shape
    return c_api.make_tensor(ptr, c_api.DType.FP16, shape, (S * H * D, H * D, D, 1))


def test_backward_params_layout_follows_the_header():
    P = c_api.BackwardParams
    assert P.struct_size.offset == 0
    # struct_size, then dout, q, k, v, out (5 tensors), lse, dq, dk, dv, then 4 x 4 bytes:
    # the header's order, with no padding anywhere (every field is naturally aligned).
    t = ctypes.sizeof(c_api.FlashattnTensor)
    assert t == 80
    assert [P.dout.offset, P.q.offset, P.k.offset, P.v.offset, P.out.offset] == [
        8, 8 + t, 8 + 2 * t, 8 + 3 * t, 8 + 4 * t]
    assert P.lse.offset == 8 + 5 * t
    assert [P.dq.offset, P.dk.offset, P.dv.offset] == [16 + 5 * t, 16 + 6 * t, 16 + 7 * t]
    assert [P.softmax_scale.offset, P.causal.offset, P.deterministic.offset,
            P.backend.offset] == [16 + 8 * t + 4 * i for i in range(4)]
    # Version 1 ends on an 8-byte boundary at its last field (flashattn_c.h's rule 3); version 2
    # (window, softcap, ALiBi) appends 32 bytes and ends on one too, and so does version 3
    # (varlen offsets and lengths).
    assert P.backend.offset + 4 == 672
    assert P.alibi_batch_stride.offset + 8 == 704
    assert [P.cu_seqlens_q.offset, P.cu_seqlens_k.offset, P.num_seqs.offset, P.max_seqlen_q.offset,
            P.max_seqlen_k.offset, P.zero_outside_rows.offset] == [704, 712, 720, 724, 728, 732]
    assert P.zero_outside_rows.offset + 4 == ctypes.sizeof(P) == 736


@needs_bwd_symbol
def test_backward_params_mirror_matches_library():
    assert c_api.backward_params_size() == ctypes.sizeof(c_api.BackwardParams)


def test_make_backward_params_sets_size_and_defaults():
    t = _tensor()
    p = c_api.make_backward_params(t, t, t, t, t, 0, t, t, t)
    assert p.struct_size == ctypes.sizeof(c_api.BackwardParams)
    assert (p.lse, p.softmax_scale, p.causal, p.deterministic, p.backend) == (None, 0.0, 0, 0, 0)
    p = c_api.make_backward_params(t, t, t, t, t, 64, t, t, t, 0.5, True, True, "reference")
    assert (p.lse, p.softmax_scale, p.causal, p.deterministic, p.backend) == (
        64, 0.5, 1, 1, c_api.Backend.REFERENCE)
    with pytest.raises(ValueError, match="backend"):
        c_api.make_backward_params(t, t, t, t, t, 0, t, t, t, backend="sm70")


class _StandIn:
    """A CDLL stand-in with only the given symbols (ctypes raises AttributeError for others)."""

    _name = "/stand-in/libflashattn.so"

    def __init__(self, params_size=None):
        if params_size is not None:
            self.flashattn_backward_ex = lambda *a: 0
            self.flashattn_resolve_backward_backend_ex = lambda *a: 0
            self.flashattn_backward_params_size = lambda: params_size


@pytest.fixture
def restore_backward_state():
    saved = c_api._bwd_unavailable
    yield
    c_api._bwd_unavailable = saved


def test_library_without_backward_symbols(restore_backward_state, monkeypatch):
    c_api._declare_backward(_StandIn())
    msg = c_api._bwd_unavailable
    assert "flashattn_backward_ex" in msg and "rebuild" in msg and "/stand-in/" in msg
    monkeypatch.setattr(c_api, "load_library", lambda: _StandIn())
    assert not c_api.has_backward()
    t = _tensor()
    with pytest.raises(NotImplementedError, match="flashattn_backward_ex"):
        c_api.backward(t, t, t, t, t, 0, t, t, t)
    with pytest.raises(NotImplementedError, match="no backward pass"):
        c_api.resolve_backward_backend(t, t, t, t, t, 0, t, t, t)


def test_library_whose_backward_struct_differs(restore_backward_state):
    c_api._declare_backward(_StandIn(params_size=ctypes.sizeof(c_api.BackwardParams) + 8))
    msg = c_api._bwd_unavailable
    assert "disagree" in msg and str(ctypes.sizeof(c_api.BackwardParams) + 8) in msg
    c_api._declare_backward(_StandIn(params_size=ctypes.sizeof(c_api.BackwardParams)))
    assert c_api._bwd_unavailable is None


@needs_lib
def test_forward_loads_with_or_without_backward():
    # The forward's entry points are declared either way; the backward is an addition.
    lib = c_api.load_library()
    assert lib.flashattn_forward_ex.restype is ctypes.c_int
    assert c_api.has_backward() == (c_api.backward_unavailable() is None)


@needs_bwd_symbol
def test_backward_ex_null_pointer_is_value_error():
    t = _tensor()
    with pytest.raises(ValueError, match="null"):
        c_api.backward(t, t, t, t, t, 0, t, t, t)


@needs_bwd_symbol
def test_backward_ex_size_rule():
    lib = c_api.load_library()
    t = _tensor()
    assert lib.flashattn_backward_ex(None, None) == c_api.Status.INVALID_ARGUMENT
    assert "params" in c_api.last_error()
    p = c_api.make_backward_params(t, t, t, t, t, 0, t, t, t)
    p.struct_size = 16
    assert lib.flashattn_backward_ex(ctypes.byref(p), None) == c_api.Status.INVALID_ARGUMENT
    assert "struct_size" in c_api.last_error()
