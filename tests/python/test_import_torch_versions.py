"""`import flashattn` against whatever torch the interpreter finds: none, a torch older than 2.4
(no torch.library.custom_op, e.g. Debian 12's 1.13), a torch whose import fails.

Each case runs in a fresh interpreter whose `torch` is replaced before flashattn is imported (a
None entry in sys.modules, a stand-in module, a package that raises), so these tests need
neither torch nor a GPU and leave this process's modules alone. The child asserts; the test
fails with the child's traceback.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The ctypes layer (flashattn.c_api) that must survive every torch: exercised without a device.
_CTYPES_CHECKS = """
    from flashattn import c_api
    for name in ("find_library", "load_library", "library_version", "last_error", "forward",
                 "resolve_backend", "make_tensor", "raise_for_status", "backward",
                 "resolve_backward_backend", "has_backward", "backward_unavailable"):
        assert callable(getattr(c_api, name)), name
    assert flashattn.library_version is c_api.library_version
    t = c_api.make_tensor(0, c_api.DType.BF16, (2, 3, 4, 64), (768, 256, 64, 1))
    assert t.data is None and t.dtype == c_api.DType.BF16
    assert list(t.shape) == [2, 3, 4, 64] and list(t.stride) == [768, 256, 64, 1]
    try:
        lib = c_api.find_library()
    except FileNotFoundError:
        lib = None  # not built here: the lookup itself still ran
    if lib is not None:
        assert flashattn.library_version() == flashattn.__version__
        try:  # validated in the library before it looks for a device
            c_api.forward(t, t, t, t)
        except ValueError as e:
            assert "null data pointer" in str(e), e
            assert "null data pointer" in c_api.last_error()
        else:
            raise AssertionError("forward on null pointers did not raise")
        # With or without the backward symbols the library loads; has_backward says which.
        assert c_api.has_backward() == (c_api.backward_unavailable() is None)
"""

# A stand-in for a torch without torch.library.custom_op: the attributes flashattn._torch
# touches at import (dtypes, Tensor, library, autograd.Function) and, for the calls below,
# what flash_attn_forward reads of a tensor. No `ops`, `compiler` or `_dynamo`: reaching for
# the custom op (or for torch.compile) would be an AttributeError.
_OLD_TORCH = """
    import sys, types

    torch = types.ModuleType("torch")
    torch.__version__ = "1.13.1"
    torch.float16, torch.bfloat16, torch.float32 = "float16", "bfloat16", "float32"

    class Tensor:
        def __init__(self, shape, requires_grad=False, dtype="bfloat16"):
            self.shape, self.requires_grad, self.dtype = tuple(shape), requires_grad, dtype
            self.is_cuda = True
            self.device = types.SimpleNamespace(type="cuda")

        def dim(self):
            return len(self.shape)

        def size(self, i):
            return self.shape[i]

        def stride(self, i):
            return 1 if i in (-1, 3) else 64

        def get_device(self):
            return 0

    torch.Tensor = Tensor
    torch.library = types.ModuleType("torch.library")
    torch.library.Library = object  # torch 1.13's torch.library has Library, impl, define
    torch.autograd = types.ModuleType("torch.autograd")

    class FunctionCtx:  # what _FwdFunction's forward and backward use of autograd's ctx
        def save_for_backward(self, *tensors):
            self.saved_tensors = tensors

        def set_materialize_grads(self, value):
            self.materialize_grads = value

    class Function:
        last_ctx = None

        @classmethod
        def apply(cls, *args):
            Function.last_ctx = FunctionCtx()
            return cls.forward(Function.last_ctx, *args)

    torch.autograd.Function = Function
    grad_enabled = [True]
    torch.is_grad_enabled = lambda: grad_enabled[0]
    sys.modules["torch"] = torch
    sys.modules["torch.library"] = torch.library
    sys.modules["torch.autograd"] = torch.autograd
"""


def _run(*parts: str) -> None:
    """Run the concatenated code parts (each dedented on its own) in a fresh interpreter."""
    env = dict(os.environ)
    if env.get("FLASHATTN_TEST_INSTALLED") != "1":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "python"),
                                                        env.get("PYTHONPATH")) if p)
    code = "\n".join(textwrap.dedent(p) for p in parts) + "\nprint('CHILD_OK')\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    if r.returncode != 0 or not r.stdout.strip().endswith("CHILD_OK"):
        pytest.fail(f"child exited {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n"
                    f"--- stderr\n{r.stderr[-3000:]}", pytrace=False)


def test_import_with_no_torch_at_all():
    _run("""
        import sys
        sys.modules["torch"] = None  # `import torch` now raises ImportError
        import flashattn
        assert not flashattn.HAS_TORCH and not flashattn.HAS_CUSTOM_OP
        assert flashattn.TORCH_ERROR is None  # plainly absent, nothing went wrong
        assert "flashattn._torch" not in sys.modules  # the binding was never imported
        assert flashattn.__version__ == "0.1.0"
        for fn in (flashattn.flash_attn_func, flashattn.flash_attn_forward,
                   flashattn.flash_attn_backward, flashattn.which_backend,
                   flashattn.which_backward_backend):
            try:
                fn(None, None, None)
            except ImportError as e:
                assert "needs PyTorch" in str(e) and "flashattn.c_api" in str(e), e
            else:
                raise AssertionError(f"{fn} without torch did not raise ImportError")
        for op in (flashattn.fwd_op, flashattn.bwd_op):
            try:
                op()
            except ImportError as e:
                assert ">= 2.4" in str(e), e
            else:
                raise AssertionError(f"{op} without torch did not raise")
    """, _CTYPES_CHECKS)


def test_import_with_torch_lacking_custom_op():
    _run(_OLD_TORCH, """
        import flashattn
        from flashattn import _torch as ft
        assert flashattn.HAS_TORCH and flashattn.TORCH_ERROR is None
        assert not flashattn.HAS_CUSTOM_OP and not ft.HAS_CUSTOM_OP
        assert flashattn.CUSTOM_OP_MIN_TORCH == "2.4"
        assert not hasattr(ft, "_fwd")  # nothing was registered

        # The compiled path says which torch it needs.
        for op in (flashattn.fwd_op, flashattn.bwd_op):
            try:
                op()
            except RuntimeError as e:
                msg = str(e)
                assert "torch >= 2.4" in msg and "1.13.1" in msg and "custom_op" in msg, msg
                assert "torch.compile" in msg, msg
            else:
                raise AssertionError(f"{op} on torch 1.13 did not raise")
        assert ft._is_compiling() is False  # no torch.compiler / torch._dynamo: never compiling

        # The eager front end dispatches without the op: record what it launches.
        calls = []
        ft._run = lambda *a: calls.append(("run",) + a[3:]) or ("out", "lse")
        ft._fwd_impl = lambda *a: calls.append(("function",) + a[3:]) or ("out", "lse")
        q, kv = torch.Tensor((2, 16, 4, 64)), torch.Tensor((2, 16, 2, 64))
        assert flashattn.flash_attn_func(q, kv, kv, causal=True) == "out"
        assert calls.pop() == ("run", 0.0, True, 0)  # nothing to differentiate: direct launch
        qg = torch.Tensor((2, 16, 4, 64), requires_grad=True)
        out = flashattn.flash_attn_func(qg, kv, kv, softmax_scale=0.5, return_lse=True,
                                        deterministic=True, backend="sm80")
        assert out == ("out", "lse")
        assert calls.pop() == ("function", 0.5, False, 2)  # through the autograd.Function
        ctx = torch.autograd.Function.last_ctx

        # Its backward hands the saved tensors and the forward's arguments (deterministic
        # included) to the backward body; lse got no gradient (None), so no lse term.
        assert ctx.saved_tensors == (qg, kv, kv, "out", "lse"), ctx.saved_tensors
        assert ctx.materialize_grads is False
        ft._bwd_impl = lambda *a: calls.append(("bwd",) + a) or ("dq", "dk", "dv")
        grads = ft._FwdFunction.backward(ctx, "dout", None)
        assert grads == ("dq", "dk", "dv", None, None, None, None), grads
        assert calls.pop() == ("bwd", "dout", qg, kv, kv, "out", "lse", 0.5, False, True, 2)

        grad_enabled[0] = False  # torch.no_grad(): direct launch again
        flashattn.flash_attn_func(qg, kv, kv)
        assert calls.pop()[0] == "run" and not calls
        grad_enabled[0] = True

        # FlashAttention 2's keywords this library lacks are refused by name, before any launch.
        for kw, word in (({"dropout_p": 0.1}, "dropout"),
                         ({"return_attn_probs": True}, "return_attn_probs")):
            try:
                flashattn.flash_attn_func(q, kv, kv, **kw)
            except NotImplementedError as e:
                assert word in str(e), e
            else:
                raise AssertionError(f"{kw} was accepted")
        assert not calls

        # Input checks still run before anything is dispatched.
        try:
            flashattn.flash_attn_func(torch.Tensor((16, 4, 64)), kv, kv)
        except ValueError as e:
            assert "4-D" in str(e), e
        else:
            raise AssertionError("a 3-D q was accepted")
    """, _CTYPES_CHECKS)


def test_import_with_torch_whose_import_fails(tmp_path):
    # A torch that raises something other than ImportError (a missing shared library, say).
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise OSError('libtorch_cpu.so: cannot open shared "
                                     "object file')\n")
    _run(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import flashattn
        assert not flashattn.HAS_TORCH
        assert "OSError" in flashattn.TORCH_ERROR and "libtorch_cpu" in flashattn.TORCH_ERROR
        try:
            flashattn.flash_attn_func(None, None, None)
        except ImportError as e:
            assert "libtorch_cpu" in str(e), e
        else:
            raise AssertionError("flash_attn_func did not raise ImportError")
    """, _CTYPES_CHECKS)


def test_import_with_torch_the_binding_cannot_use():
    # A torch without torch.autograd: the binding fails to load, the ctypes layer stays.
    _run(_OLD_TORCH, """
        del torch.autograd
        del sys.modules["torch.autograd"]
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import flashattn
        assert not flashattn.HAS_TORCH and not flashattn.HAS_CUSTOM_OP
        assert "1.13.1" in flashattn.TORCH_ERROR and "autograd" in flashattn.TORCH_ERROR
        assert any(issubclass(w.category, RuntimeWarning) and "c_api" in str(w.message)
                   for w in caught), [str(w.message) for w in caught]
        try:
            flashattn.flash_attn_func(None, None, None)
        except ImportError as e:
            assert "autograd" in str(e), e
        else:
            raise AssertionError("flash_attn_func did not raise ImportError")
    """, _CTYPES_CHECKS)
