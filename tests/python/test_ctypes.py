"""The package without torch: locating and loading libflashattn, version, C ABI error paths.

These run on any machine where libflashattn.so has been built (no GPU, no torch needed):
argument validation happens in the library before it looks for a device.
"""
import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import flashattn
from flashattn import c_api

REPO = Path(__file__).resolve().parents[2]


def _have_library():
    try:
        c_api.find_library()
        return True
    except FileNotFoundError:
        return False


needs_lib = pytest.mark.skipif(not _have_library(),
                               reason="libflashattn.so not built (cmake --build --preset default)")


def test_package_version():
    assert flashattn.__version__ == "0.1.0"


@needs_lib
def test_library_version_matches_package():
    assert flashattn.library_version() == flashattn.__version__


def test_import_without_torch_reports_version():
    # Hide torch from the interpreter: importing must still work and report the version.
    code = textwrap.dedent("""
        import sys
        class _NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch hidden for this test")
                return None
        sys.meta_path.insert(0, _NoTorch())
        import flashattn
        assert not flashattn.HAS_TORCH
        assert "torch" not in sys.modules
        print(flashattn.__version__)
        try:
            flashattn.flash_attn_func(None, None, None)
        except ImportError as e:
            assert "PyTorch" in str(e)
        else:
            raise SystemExit("flash_attn_func without torch did not raise ImportError")
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(flashattn.__file__).parent.parent))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == flashattn.__version__


def test_import_compiles_nothing():
    pkg = Path(flashattn.__file__).parent
    assert not any(p.suffix in (".cu", ".cpp", ".c") for p in pkg.iterdir())
    src = "".join(p.read_text() for p in pkg.glob("*.py"))
    for word in ("cpp_extension", "load_inline", "subprocess", "nvcc"):
        assert word not in src, word


def test_env_override_must_exist(monkeypatch):
    monkeypatch.setenv("FLASHATTN_LIBRARY", "/nonexistent/libflashattn.so")
    with pytest.raises(FileNotFoundError, match="FLASHATTN_LIBRARY"):
        c_api.find_library()


@needs_lib
def test_env_override_is_used(monkeypatch):
    lib = c_api.find_library()
    monkeypatch.setenv("FLASHATTN_LIBRARY", str(lib.resolve()))
    assert c_api.find_library() == lib.resolve()


def _host_tensor(dtype, shape, buf=None):
    n = shape[0] * shape[1] * shape[2] * shape[3]
    buf = buf if buf is not None else (ctypes.c_uint16 * (n + 8))()
    addr = ctypes.addressof(buf)
    addr += (-addr) % 16
    stride = (shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1)
    return c_api.make_tensor(addr, dtype, shape, stride), buf


@needs_lib
def test_c_abi_null_pointer_is_value_error():
    t = c_api.make_tensor(0, c_api.DType.FP16, (1, 4, 2, 64), (512, 128, 64, 1))
    with pytest.raises(ValueError, match="q: null data pointer"):
        c_api.forward(t, t, t, t)


@needs_lib
def test_c_abi_float32_is_value_error():
    t, _buf = _host_tensor(c_api.DType.FP32, (1, 4, 2, 64))
    with pytest.raises(ValueError, match="unsupported dtype float32"):
        c_api.forward(t, t, t, t)


@needs_lib
def test_c_abi_head_dim_not_multiple_of_8_is_value_error():
    # Any multiple of 8 up to 256 is a valid head dim (80 included); 84 is not.
    t, _buf = _host_tensor(c_api.DType.BF16, (1, 4, 2, 84))
    with pytest.raises(ValueError, match="head dim 84"):
        c_api.forward(t, t, t, t)


@needs_lib
def test_c_abi_mismatched_heads_is_value_error():
    q, _b1 = _host_tensor(c_api.DType.FP16, (1, 4, 6, 64))
    k, _b2 = _host_tensor(c_api.DType.FP16, (1, 4, 4, 64))
    with pytest.raises(ValueError, match="must divide"):
        c_api.forward(q, k, k, q)


@needs_lib
def test_c_abi_unknown_backend_name():
    t, _buf = _host_tensor(c_api.DType.FP16, (1, 4, 2, 64))
    with pytest.raises(ValueError, match="backend"):
        c_api.forward(t, t, t, t, backend="sm70")


@needs_lib
def test_forward_params_mirror_matches_library():
    P = c_api.ForwardParams
    assert ctypes.sizeof(P) == c_api.forward_params_size()
    assert P.struct_size.offset == 0
    # Each version ends on an 8-byte boundary at its last field, with no tail padding
    # (flashattn_c.h's rule 3); the last field of the newest ends the struct.
    assert (P.reserved0.offset + 4) % 8 == 0
    assert P.cu_seqlens_q.offset == P.reserved0.offset + 4
    assert (P.reserved1.offset + 4) % 8 == 0
    assert P.window_left_plus1.offset == P.reserved1.offset + 4
    assert [P.window_right_plus1.offset, P.softcap.offset, P.reserved2.offset,
            P.alibi_slopes.offset, P.alibi_batch_stride.offset] == [
        P.window_left_plus1.offset + d for d in (4, 8, 12, 16, 24)]
    assert P.alibi_batch_stride.offset + 8 == ctypes.sizeof(P) == c_api.forward_params_size()


def test_backward_params_mirror_ends_at_its_last_field():
    # Version 2 (window, softcap, ALiBi) follows version 1's last field (backend) with no gap,
    # version 3 (varlen) follows version 2's, and it ends the struct (flashattn_c.h's rule 3).
    P = c_api.BackwardParams
    assert P.window_left_plus1.offset == P.backend.offset + 4
    assert (P.window_left_plus1.offset % 8) == 0
    assert [P.window_right_plus1.offset, P.softcap.offset, P.reserved0.offset,
            P.alibi_slopes.offset, P.alibi_batch_stride.offset] == [
        P.window_left_plus1.offset + d for d in (4, 8, 12, 16, 24)]
    assert P.cu_seqlens_q.offset == P.alibi_batch_stride.offset + 8
    assert [P.cu_seqlens_k.offset, P.num_seqs.offset, P.max_seqlen_q.offset, P.max_seqlen_k.offset,
            P.zero_outside_rows.offset] == [P.cu_seqlens_q.offset + d for d in (8, 16, 20, 24, 28)]
    assert P.zero_outside_rows.offset + 4 == ctypes.sizeof(P)


@needs_lib
def test_backward_params_mirror_matches_library():
    if not c_api.has_backward():
        pytest.skip(f"no usable backward pass: {c_api.backward_unavailable()}")
    P = c_api.BackwardParams
    assert P.zero_outside_rows.offset + 4 == ctypes.sizeof(P) == c_api.backward_params_size()


def test_make_params_write_features():
    t = c_api.make_tensor(0, c_api.DType.FP16, (1, 4, 2, 64), (512, 128, 64, 1))
    # No features: every new field stays zero ("off").
    for p in (c_api.make_forward_params(t, t, t, t),
              c_api.make_backward_params(t, t, t, t, t, 0, t, t, t)):
        assert (p.window_left_plus1, p.window_right_plus1, p.softcap, p.alibi_slopes,
                p.alibi_batch_stride) == (0, 0, 0.0, None, 0)
    # Windows are stored plus one (-1, unbounded, is 0); softcap and ALiBi as given.
    p = c_api.make_forward_params(t, t, t, t, features=(127, -1, 30.0, 0x1000, 2))
    assert (p.window_left_plus1, p.window_right_plus1, p.softcap, p.alibi_slopes,
            p.alibi_batch_stride, p.reserved2) == (128, 0, 30.0, 0x1000, 2, 0)
    p = c_api.make_backward_params(t, t, t, t, t, 0, t, t, t, 0.5, True, False, "auto",
                                   (0, 3, 0.0, 0, 0))
    assert (p.window_left_plus1, p.window_right_plus1, p.softcap, p.alibi_slopes,
            p.alibi_batch_stride, p.reserved0) == (1, 4, 0.0, None, 0, 0)
    assert (p.softmax_scale, p.causal) == (0.5, 1)
    with pytest.raises(ValueError, match="window_left"):
        c_api.make_forward_params(t, t, t, t, features=(2 ** 31 - 1, 0, 0.0, 0, 0))


@needs_lib
def test_features_are_validated_by_the_library():
    # Validation runs before the library looks for a device: bad features name themselves.
    t, _buf = _host_tensor(c_api.DType.FP16, (1, 4, 2, 64))
    for features, word in (((-2, 0, 0.0, 0, 0), "window_left"),
                           ((0, -3, 0.0, 0, 0), "window_right"),
                           ((-1, -1, -1.0, 0, 0), "softcap"),
                           ((-1, -1, float("inf"), 0, 0), "softcap"),
                           ((-1, -1, 0.0, 0x1002, 0), "alibi_slopes"),
                           ((-1, -1, 0.0, 0x1000, 1), "alibi_batch_stride")):
        with pytest.raises(ValueError, match=word):
            c_api.forward(t, t, t, t, features=features)


def test_make_forward_params_sets_size_and_defaults():
    t = c_api.make_tensor(0, c_api.DType.FP16, (1, 4, 2, 64), (512, 128, 64, 1))
    p = c_api.make_forward_params(t, t, t, t)
    assert p.struct_size == ctypes.sizeof(c_api.ForwardParams)
    assert (p.lse, p.softmax_scale, p.causal, p.backend, p.reserved0) == (None, 0.0, 0, 0, 0)
    p = c_api.make_forward_params(t, t, t, t, 64, 0.5, True, "sm80")
    assert (p.lse, p.softmax_scale, p.causal, p.backend) == (64, 0.5, 1, c_api.Backend.SM80)


@needs_lib
def test_forward_ex_size_rule():
    lib = c_api.load_library()
    t, _buf = _host_tensor(c_api.DType.FP16, (0, 4, 2, 64))  # empty: no device needed
    p = c_api.make_forward_params(t, t, t, t)
    assert lib.flashattn_forward_ex(ctypes.byref(p), None) == c_api.Status.OK, c_api.last_error()
    assert lib.flashattn_forward_ex(None, None) == c_api.Status.INVALID_ARGUMENT
    assert "params: null" in c_api.last_error()
    p.struct_size = 16
    assert lib.flashattn_forward_ex(ctypes.byref(p), None) == c_api.Status.INVALID_ARGUMENT
    assert "params.struct_size" in c_api.last_error()

    # A binding from a newer header: unknown trailing fields must be zero.
    class Newer(ctypes.Structure):
        _fields_ = [("base", c_api.ForwardParams), ("extra", ctypes.c_uint64 * 2)]

    n = Newer(c_api.make_forward_params(t, t, t, t))
    n.base.struct_size = ctypes.sizeof(Newer)
    pn = ctypes.cast(ctypes.byref(n), ctypes.POINTER(c_api.ForwardParams))
    assert lib.flashattn_forward_ex(pn, None) == c_api.Status.OK, c_api.last_error()
    n.extra[1] = 1
    assert lib.flashattn_forward_ex(pn, None) == c_api.Status.INVALID_ARGUMENT
    assert "not zero" in c_api.last_error()


@needs_lib
def test_resolve_backend_goes_through_the_struct():
    t, _buf = _host_tensor(c_api.DType.FP16, (1, 4, 2, 64))
    try:
        name = c_api.resolve_backend(t, t, t, t)
    except RuntimeError as e:  # no GPU here: reported after validation
        assert "compute capability 8.0" in str(e)
    else:
        assert name in c_api.BACKENDS
    with pytest.raises(ValueError, match="softmax_scale"):
        c_api.resolve_backend(t, t, t, t, softmax_scale=-1.0)
