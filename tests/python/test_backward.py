"""flash_attn_func's gradients (the flashattn::bwd op and the autograd formula on flashattn::fwd)
against a torch reference, and their integration with PyTorch: opcheck (autograd included),
torch.compile(fullgraph=True) through forward and backward, CUDA-graph capture of both,
deterministic=True, non-contiguous dout, the lse's own gradient, and FlashAttention 2's
keywords this library refuses.

Correctness rule (as the forward's, docs/ARCHITECTURE.md): for each of dq, dk, dv,
max|ours - ref| <= 2 * max|lowp - ref| + GRAD_ATOL, with ref the naive attention's autograd in
fp64 and lowp the same in the inputs' dtype.

Without torch everything here skips. Without a CUDA device, or with a library that has no
backward pass, the GPU tests skip; the keyword checks and the autograd formula test (the op
bodies replaced by fp64 torch math on the CPU) run wherever torch does.
"""
import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from flashattn import _torch as fa_torch  # noqa: E402
from flashattn import c_api  # noqa: E402

from _reference import GRAD_ATOL, attention, attention_grads, max_err  # noqa: E402


from _markers import needs_cuda, needs_custom_op, needs_gpu  # noqa: E402,F401

MEAN = 0.3  # inputs are offset from zero mean (docs/ARCHITECTURE.md)
DTYPES = pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
CAUSAL = pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


def rand(*shape, dtype=torch.bfloat16, mean=MEAN, device="cuda"):
    return (torch.randn(*shape, device=device, dtype=torch.float32) + mean).to(dtype)


def qkv(B, Sq, Sk, Hq, Hkv, D, dtype=torch.bfloat16, Dv=None):
    return rand(B, Sq, Hq, D, dtype=dtype), rand(B, Sk, Hkv, D, dtype=dtype), \
        rand(B, Sk, Hkv, Dv or D, dtype=dtype)


def run_grads(q, k, v, dout, causal, softmax_scale=None, dlse=None, **kw):
    """(out, lse, dq, dk, dv) of flash_attn_func through autograd; dout None = lse only.
    q, k, v keep their layout (detach() is a view)."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out, lse = flashattn.flash_attn_func(*leaves, softmax_scale=softmax_scale, causal=causal,
                                         return_lse=True, **kw)
    outs, grads = [], []
    for o, g in ((out, dout), (lse, dlse)):
        if g is not None:
            outs.append(o)
            grads.append(g)
    dq, dk, dv = torch.autograd.grad(outs, leaves, grads)
    return out, lse, dq, dk, dv


def check_grads(q, k, v, dout, causal, softmax_scale=None, dlse=None, **kw):
    """Our dq, dk, dv against the fp64 reference, bounded by the same-dtype math's error."""
    *_, dq, dk, dv = run_grads(q, k, v, dout, causal, softmax_scale, dlse, **kw)
    d = dout if dout is not None else q.new_zeros((*q.shape[:3], v.shape[3]))
    ref = attention_grads(q, k, v, d, softmax_scale, causal, torch.float64, dlse)
    lowp = attention_grads(q, k, v, d, softmax_scale, causal, q.dtype, dlse)
    for name, ours, r, low, t in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, lowp, (q, k, v)):
        assert ours.shape == t.shape and ours.dtype == t.dtype, (name, ours.shape, ours.dtype)
        assert not torch.isnan(ours).any(), f"NaN in {name}"
        err, low_err = max_err(ours, r), max_err(low, r)
        bound = 2 * low_err + GRAD_ATOL[q.dtype]
        assert err <= bound, f"{name} err {err:.3g} > bound {bound:.3g} (lowp err {low_err:.3g})"
    return dq, dk, dv


# (B, Sq, Sk, Hq, Hkv, D): square; Sq < Sk with GQA; Sq > Sk (causal leaves the first Sq - Sk
# rows fully masked); MQA at D=256; one query against many keys.
SHAPES = {
    "square": (2, 128, 128, 4, 4, 64),
    "sq_lt_sk_gqa": (1, 113, 203, 4, 2, 128),
    "sq_gt_sk_gqa": (2, 203, 113, 6, 3, 64),
    "mqa_d256": (1, 96, 96, 4, 1, 256),
    "sq1": (2, 1, 77, 2, 2, 64),
}


# ----------------------------------------------------------------------------- correctness

@needs_gpu
@DTYPES
@CAUSAL
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_grads(shape, causal, dtype):
    B, Sq, Sk, Hq, Hkv, D = shape
    q, k, v = qkv(B, Sq, Sk, Hq, Hkv, D, dtype)
    dq, dk, dv = check_grads(q, k, v, torch.randn_like(q), causal)
    if causal and Sq > Sk:  # masked rows see no key: nothing flows back from them
        assert torch.all(dq[:, : Sq - Sk] == 0)


@needs_gpu
@CAUSAL
@pytest.mark.parametrize("d,dv", [(192, 128), (64, 128), (128, 64), (40, 24), (80, 80),
                                  (200, 200)])
def test_grads_head_dims(d, dv, causal):
    # Head dims between the instantiated kernels, and v's head dim differing from q/k's; the lse
    # term too (its gradient goes through calls with v := k).
    q, k, v = qkv(2, 150, 203, 4, 2, d, Dv=dv)
    dlse = torch.randn(2, 4, 150, device="cuda")
    check_grads(q, k, v, torch.randn(2, 150, 4, dv, device="cuda").to(q.dtype), causal,
                dlse=dlse)


@needs_gpu
@CAUSAL
def test_grads_softmax_scale_and_determinism_flag(causal):
    q, k, v = qkv(1, 150, 150, 4, 2, 64)
    dout = torch.randn_like(q)
    check_grads(q, k, v, dout, causal, softmax_scale=0.3)
    check_grads(q, k, v, dout, causal, deterministic=True)


@needs_gpu
@CAUSAL
@pytest.mark.parametrize("shape", ["square", "sq_gt_sk_gqa"])
def test_lse_gradient(shape, causal):
    # lse is an output like out: a loss that uses it gets its gradient too.
    B, Sq, Sk, Hq, Hkv, D = SHAPES[shape]
    q, k, v = qkv(B, Sq, Sk, Hq, Hkv, D)
    dlse = torch.randn(B, Hq, Sq, device="cuda")
    check_grads(q, k, v, torch.randn_like(q), causal, dlse=dlse)
    # lse alone: out got no gradient, so dv is zero.
    dq, dk, dv = check_grads(q, k, v, None, causal, dlse=dlse)
    assert torch.all(dv == 0)


@needs_gpu
def test_packed_qkv_grads():
    # Views of one packed tensor: the gradients land in its slices.
    B, S, H, D = 2, 100, 4, 64
    packed = rand(B, S, 3, H, D).requires_grad_()
    q, k, v = packed.unbind(2)
    dout = torch.randn(B, S, H, D, device="cuda", dtype=q.dtype)
    out = flashattn.flash_attn_func(q, k, v, causal=True, deterministic=True)
    out.backward(dout)
    dq, dk, dv = check_grads(*(t.detach() for t in (q, k, v)), dout, True, deterministic=True)
    for i, g in enumerate((dq, dk, dv)):
        assert torch.equal(packed.grad[:, :, i], g)


@needs_gpu
def test_empty_sequences_give_zero_grads():
    q = rand(1, 5, 2, 64).requires_grad_()
    k = rand(1, 0, 2, 64).requires_grad_()
    out = flashattn.flash_attn_func(q, k, k)
    out.backward(torch.randn_like(out))
    assert torch.all(q.grad == 0) and k.grad.shape == k.shape
    q = rand(1, 0, 2, 64).requires_grad_()
    k, v = rand(1, 7, 2, 64).requires_grad_(), rand(1, 7, 2, 64).requires_grad_()
    out = flashattn.flash_attn_func(q, k, v)
    out.backward(torch.randn_like(out))
    assert torch.all(k.grad == 0) and torch.all(v.grad == 0)


@needs_gpu
@CAUSAL
def test_flash_attn_backward_matches_autograd(causal):
    # The direct call (no autograd) gives what autograd gives.
    q, k, v = qkv(2, 130, 130, 4, 2, 64)
    dout = torch.randn_like(q)
    out, lse, *grads = run_grads(q, k, v, dout, causal, deterministic=True)
    direct = flashattn.flash_attn_backward(dout, q, k, v, out.detach(), lse.detach(),
                                           causal=causal, deterministic=True)
    for a, b in zip(direct, grads):
        assert torch.equal(a, b)


@needs_gpu
@pytest.mark.parametrize("backend", ["auto", "sm90", "sm80", "reference"])
def test_backward_backends(backend):
    q, k, v = qkv(2, 130, 130, 4, 2, 128)
    try:
        name = flashattn.which_backward_backend(q, k, v, causal=True, backend=backend)
    except NotImplementedError as e:
        pytest.skip(f"backward backend {backend} not available here: {e}")
    assert name in ("sm90", "sm80", "reference")
    if backend != "auto":
        assert name == backend
    check_grads(q, k, v, torch.randn_like(q), True, backend=backend)


# ----------------------------------------------------------------------------- dout layouts

def _dout_layouts(dout):
    """The same values as dout in layouts autograd can hand the backward."""
    B, S, H, D = dout.shape
    transposed = dout.transpose(1, 2).contiguous().transpose(1, 2)  # (B, H, S, D) storage
    wide = torch.zeros(B, S, H, 2 * D, device=dout.device, dtype=dout.dtype)
    wide[..., ::2] = dout
    strided = wide[..., ::2]  # headdim stride 2: the library cannot take it, so it is copied
    flat = torch.empty(dout.numel() + 1, device=dout.device, dtype=dout.dtype)
    misaligned = flat[1:].view(B, S, H, D)  # 2-byte offset: not 16-byte aligned
    misaligned.copy_(dout)
    return {"transposed": transposed, "headdim_stride_2": strided, "misaligned": misaligned}


@needs_gpu
@CAUSAL
def test_non_contiguous_dout(causal, monkeypatch):
    q, k, v = qkv(2, 96, 96, 4, 2, 64)
    dout = torch.randn_like(q)
    _, _, *want = run_grads(q, k, v, dout, causal, deterministic=True)
    for name, d in _dout_layouts(dout).items():
        # misaligned is contiguous in torch's sense; its base is what the library cannot take.
        assert torch.equal(d, dout) and (name == "misaligned" or not d.is_contiguous())
        copies = []
        orig = torch.Tensor.clone

        def spy(t, *a, **kw):
            copies.append(tuple(t.stride()))
            return orig(t, *a, **kw)

        monkeypatch.setattr(torch.Tensor, "clone", spy)
        _, _, *got = run_grads(q, k, v, d, causal, deterministic=True)
        monkeypatch.undo()
        for a, b in zip(got, want):
            assert torch.equal(a, b), name
        # A layout the library reads is used as it is; the others are copied once.
        assert len(copies) == (0 if name == "transposed" else 1), (name, copies)


@needs_gpu
def test_expanded_dout_from_sum():
    # out.sum()'s gradient is a ones tensor expanded from a scalar (all strides 0).
    q, k, v = qkv(1, 64, 64, 2, 2, 64)
    ones = torch.ones((), device="cuda", dtype=q.dtype).expand(q.shape)
    out, _, *got = run_grads(q, k, v, ones, True, deterministic=True)
    _, _, *want = run_grads(q, k, v, torch.ones_like(q), True, deterministic=True)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- determinism

@needs_gpu
@CAUSAL
def test_deterministic_is_bitwise_reproducible(causal):
    # Long enough, and GQA, so that many key blocks and query heads add into the same dq/dk/dv.
    q, k, v = qkv(1, 1024, 1024, 8, 2, 128)
    dout = torch.randn_like(q)
    _, _, *first = run_grads(q, k, v, dout, causal, deterministic=True)
    for _ in range(4):
        _, _, *again = run_grads(q, k, v, dout, causal, deterministic=True)
        for a, b in zip(first, again):
            assert torch.equal(a, b)
    s = torch.cuda.Stream()  # and on another stream (its own library workspace)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _, _, *other = run_grads(q, k, v, dout, causal, deterministic=True)
    torch.cuda.current_stream().wait_stream(s)
    for a, b in zip(first, other):
        assert torch.equal(a, b)


@needs_gpu
def test_backward_runs_on_current_stream():
    q, k, v = qkv(2, 513, 513, 4, 4, 128)
    dout = torch.randn_like(q)
    _, _, *want = run_grads(q, k, v, dout, False, deterministic=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _, _, *got = run_grads(q, k, v, dout, False, deterministic=True)
        got = [g * 1 for g in got]  # ordered after the backward only if it ran on s
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for a, b in zip(got, want):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- errors

@needs_cuda
def test_library_without_backward_raises_not_implemented(monkeypatch):
    monkeypatch.setattr(c_api, "_bwd_unavailable", "stand-in library without the backward")
    monkeypatch.setattr(c_api, "load_library", lambda: None)
    q = rand(1, 32, 2, 64)
    qg = q.clone().requires_grad_()
    monkeypatch.setattr(fa_torch, "_run", lambda *a: (torch.zeros_like(q),
                                                      torch.zeros(1, 2, 32, device="cuda")))
    out = flashattn.flash_attn_func(qg, q, q)
    with pytest.raises(NotImplementedError, match="stand-in library without the backward"):
        out.float().sum().backward()


@needs_gpu
@needs_custom_op
def test_double_backward_raises():
    q, k, v = (t.requires_grad_() for t in qkv(1, 32, 32, 2, 2, 64))
    out = flashattn.flash_attn_func(q, k, v)
    dq, = torch.autograd.grad(out.float().square().sum(), q, create_graph=True)
    with pytest.raises(NotImplementedError, match="double backward"):
        dq.float().sum().backward()


@needs_gpu
def test_bad_backward_arguments_rejected():
    q, k, v = qkv(1, 16, 16, 2, 2, 64)
    out, lse = flashattn.flash_attn_forward(q, k, v)
    with pytest.raises(ValueError, match="dout"):
        flashattn.flash_attn_backward(q[:, :8], q, k, v, out, lse)
    with pytest.raises(ValueError, match="lse"):
        flashattn.flash_attn_backward(q, q, k, v, out, lse.transpose(1, 2))
    with pytest.raises(ValueError, match="out"):
        flashattn.flash_attn_backward(q, q, k, v, out.half(), lse)


# FlashAttention 2's keywords this library does not implement: refused by name before anything
# is looked at (CPU tensors would otherwise be the error), so these need torch but no GPU.
# (window_size, softcap and alibi_slopes are implemented: tests/python/test_features.py.)
@pytest.mark.parametrize("kw,word", [
    ({"dropout_p": 0.1}, "dropout"),
    ({"return_attn_probs": True}, "return_attn_probs"),
], ids=["dropout", "attn_probs"])
def test_unsupported_keywords_raise_not_implemented(kw, word):
    q = torch.zeros(1, 4, 2, 64, dtype=torch.float16)
    with pytest.raises(NotImplementedError, match=word):
        flashattn.flash_attn_func(q, q, q, **kw)


def test_supported_keyword_values_pass_through():
    # Their defaults (and FA2's list spelling of the window) reach the input checks.
    q = torch.zeros(1, 4, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="CUDA"):
        flashattn.flash_attn_func(q, q, q, 0.0, None, True, [-1, -1], 0.0, None, True, False,
                                  False)


def test_legacy_positional_softmax_scale_is_refused():
    # Before FA2's keywords the 4th positional argument was softmax_scale; now it is dropout_p,
    # so an old positional call fails loudly instead of meaning something else.
    q = torch.zeros(1, 4, 2, 64, dtype=torch.float16)
    with pytest.raises(NotImplementedError, match="dropout"):
        flashattn.flash_attn_func(q, q, q, 0.125)
    with pytest.raises(TypeError, match="dropout_p"):
        flashattn.flash_attn_func(q, q, q, None, True)


# ----------------------------------------------------------------------------- the formula

def test_autograd_formula_on_cpu(monkeypatch):
    """The autograd wiring (what is saved, the out and lse terms, GQA, masked rows) with the op
    bodies replaced by fp64 torch math on the CPU, through the eager Function (the same _grads
    as the custom op's backward): checks the formula apart from the kernels."""

    def fwd(q, k, v, softmax_scale, causal, backend, deterministic=False):
        return attention(q, k, v, softmax_scale or None, causal, q.dtype)

    def bwd(dout, q, k, v, out, lse, softmax_scale, causal, deterministic, backend):
        return attention_grads(q, k, v, dout, softmax_scale or None, causal, q.dtype)

    monkeypatch.setattr(fa_torch, "_fwd_impl", fwd)
    monkeypatch.setattr(fa_torch, "_bwd_impl", bwd)
    for (B, Sq, Sk, Hq, Hkv, D, Dv), causal, scale in (((2, 7, 5, 4, 2, 8, 8), True, 0.0),
                                                       ((1, 6, 9, 3, 1, 16, 16), False, 0.4),
                                                       ((1, 9, 9, 2, 2, 8, 8), True, 0.0),
                                                       ((1, 6, 9, 4, 2, 16, 8), True, 0.0),
                                                       ((2, 7, 5, 2, 1, 8, 24), False, 0.3)):
        q, k, v = (rand(B, S, H, E, dtype=torch.float64, device="cpu")
                   for S, H, E in ((Sq, Hq, D), (Sk, Hkv, D), (Sk, Hkv, Dv)))
        dout, dlse = torch.randn(B, Sq, Hq, Dv, dtype=torch.float64), torch.randn(
            B, Hq, Sq, dtype=torch.float64)
        for use_out, use_lse in ((True, False), (True, True), (False, True)):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            out, lse = fa_torch._FwdFunction.apply(*leaves, scale, causal, 0, False)
            outs = [o for o, use in ((out, use_out), (lse, use_lse)) if use]
            gs = [g for g, use in ((dout, use_out), (dlse, use_lse)) if use]
            got = torch.autograd.grad(outs, leaves, gs)
            want = attention_grads(q, k, v, dout if use_out else torch.zeros_like(dout),
                                   scale or None, causal, torch.float64,
                                   dlse if use_lse else None)
            for name, a, b in zip(("dq", "dk", "dv"), got, want):
                # _lse_grads works in fp32: agreement to fp32's precision.
                assert max_err(a, b) <= 1e-5 * (1 + b.abs().max().item()), (
                    name, use_out, use_lse, max_err(a, b))


# ----------------------------------------------------------------------------- PyTorch integration

@needs_gpu
@needs_custom_op
@CAUSAL
def test_opcheck_fwd_with_autograd(causal):
    # Inputs that require grad: opcheck's autograd-registration and AOT-dispatch checks run the
    # backward too (with random tangents for out and lse, so the lse term as well).
    for shape in ((2, 65, 70, 4, 2, 64), (1, 40, 40, 2, 2, 128)):
        q, k, v = (t.requires_grad_() for t in qkv(*shape))
        torch.library.opcheck(torch.ops.flashattn.fwd.default, (q, k, v, 0.0, causal, 0, True))
    # The six-argument form (deterministic left at its default) still resolves.
    q, k, v = (t.requires_grad_() for t in qkv(1, 33, 33, 2, 2, 64))
    torch.library.opcheck(torch.ops.flashattn.fwd.default, (q, k, v, 0.125, causal, 0))


@needs_gpu
@needs_custom_op
@CAUSAL
def test_opcheck_bwd(causal):
    q, k, v = qkv(2, 65, 70, 4, 2, 64)
    out, lse = flashattn.flash_attn_forward(q, k, v, causal=causal)
    dout = torch.randn_like(q)
    for d in (dout, _dout_layouts(dout)["headdim_stride_2"]):
        torch.library.opcheck(torch.ops.flashattn.bwd.default,
                              (d, q, k, v, out, lse, 0.0, causal, True, 0))


@needs_gpu
@needs_custom_op
def test_torch_compile_fullgraph_forward_and_backward():
    torch._dynamo.reset()
    w = torch.randn(2, 130, 4, 64, device="cuda")
    w_lse = torch.randn(2, 4, 130, device="cuda")

    def loss_out(q, k, v):
        out = flashattn.flash_attn_func(q, k, v, causal=True, deterministic=True)
        return (out.float() * w).sum()

    def loss_out_lse(q, k, v):
        out, lse = flashattn.flash_attn_func(q, k, v, causal=True, deterministic=True,
                                             return_lse=True)
        return (out.float() * w).sum() + (lse * w_lse).sum()

    base = qkv(2, 130, 130, 4, 2, 64)
    for f in (loss_out, loss_out_lse):
        grads = []
        for fn in (f, torch.compile(f, fullgraph=True)):
            leaves = [t.clone().requires_grad_() for t in base]
            fn(*leaves).backward()
            grads.append([t.grad for t in leaves])
        for a, b in zip(*grads):
            torch.testing.assert_close(a, b)


@needs_gpu
@pytest.mark.parametrize("shape", [(2, 257, 257, 4, 4, 128), (1, 300, 200, 8, 2, 64)],
                         ids=["mha", "gqa_sq_ne_sk"])
@CAUSAL
def test_cuda_graph_capture_forward_and_backward(causal, shape):
    B, Sq, Sk, Hq, Hkv, D = shape
    q, k, v = (t.requires_grad_() for t in qkv(*shape))
    dout = torch.randn(B, Sq, Hq, D, device="cuda", dtype=q.dtype)

    def step():
        out = flashattn.flash_attn_func(q, k, v, causal=causal, deterministic=True)
        return (out, *torch.autograd.grad(out, (q, k, v), dout))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside capture
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static = step()
    for _ in range(2):  # new inputs each replay
        with torch.no_grad():
            for t in (q, k, v):
                t.copy_(rand(*t.shape))
            dout.copy_(torch.randn_like(dout))
        g.replay()
        eager = step()
        torch.cuda.synchronize()
        for name, a, b in zip(("out", "dq", "dk", "dv"), static, eager):
            assert torch.equal(a, b), name
