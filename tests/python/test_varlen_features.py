"""flash_attn_varlen_func with a sliding window, softcap and ALiBi (issues 16 and 17): forward and
gradients against per-sequence references (test_features.py's attention_ext on each sequence,
its own lengths, so causal and the window are bottom-right per sequence and (batch, nheads)
slopes take the sequence's row), by the correctness rule of docs/ARCHITECTURE.md applied to the
whole packed output. Zero-length and length-1 sequences, Sq != Sk per sequence, GQA. The
forward also runs with the sm90 backend forced where the device has it (the feature kernel's
varlen twin), the gradients with the sm80 backend forced as well (its varlen kernels, both
directions). Skipped without torch or a CUDA device (the gradients also need the backward).
"""
import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402

from _markers import needs_cuda, needs_custom_op, needs_gpu  # noqa: E402
from _reference import ATOL, GRAD_ATOL, LSE_ATOL, max_err  # noqa: E402
from test_features import alibi_slopes, attention_ext, attention_ext_grads  # noqa: E402

LQ = [300, 1, 77, 0, 190, 129]
LK = [310, 20, 77, 5, 411, 64]
# (window, softcap, ALiBi: None, "shared" (nheads,) or "per_seq" (batch, nheads))
FEATURES = [
    ((127, 0), 0.0, None),
    ((256, 256), 0.0, None),
    ((1000, 3), 30.0, None),
    ((0, 0), 0.0, "per_seq"),
    ((-1, -1), 50.0, "shared"),
    ((-1, 0), 30.0, "per_seq"),
]
IDS = [f"w{w[0]}_{w[1]}_cap{int(c)}_{a or 'noalibi'}" for w, c, a in FEATURES]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(2718)


def packed(hq, hkv, d, dtype, gain):
    """Packed q, k, v (scores of std ~ gain^2 * sqrt(d) * scale) and their offsets."""
    cu_q = torch.tensor([0] + torch.tensor(LQ).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + torch.tensor(LK).cumsum(0).tolist(), dtype=torch.int32, device="cuda")

    def r(n, h, g):
        return ((torch.randn(n, h, d, device="cuda") + 0.3) * g).to(dtype)

    return r(sum(LQ), hq, gain), r(sum(LK), hkv, gain), r(sum(LK), hkv, 1.0), cu_q, cu_k


def slopes_for(kind, hq):
    if kind is None:
        return None
    return alibi_slopes(len(LQ), hq, per_batch=kind == "per_seq")


def per_sequence(fn, q, k, v, cu_q, cu_k, slopes, *tensors):
    """fn(qs, ks, vs, slopes_s, *tensor slices) on each sequence (B = 1 views): the list of its
    results, None for sequences without queries."""
    res = []
    for i in range(len(LQ)):
        q0, q1, k0, k1 = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        if q1 == q0:
            res.append(None)
            continue
        s = None if slopes is None else (slopes if slopes.dim() == 1 else slopes[i:i + 1])
        res.append(fn(q[q0:q1][None], k[k0:k1][None], v[k0:k1][None], s,
                      *(t[q0:q1][None] for t in tensors)))
    return res


def reference_out(q, k, v, cu_q, cu_k, causal, window, softcap, slopes, dtype):
    """Packed (out, lse) of the per-sequence reference in `dtype` (rows outside: 0 / -inf)."""
    out = torch.zeros(q.size(0), q.size(1), v.size(2), dtype=dtype, device="cuda")
    lse = torch.full((q.size(1), q.size(0)), float("-inf"), dtype=torch.float32, device="cuda")
    parts = per_sequence(lambda qs, ks, vs, s: attention_ext(qs, ks, vs, None, causal, window, softcap, s, dtype),
                         q, k, v, cu_q, cu_k, slopes)
    for i, p in enumerate(parts):
        if p is not None:
            q0, q1 = int(cu_q[i]), int(cu_q[i + 1])
            out[q0:q1] = p[0][0].to(dtype)
            lse[:, q0:q1] = p[1][0].to(torch.float32)
    return out, lse


@needs_cuda
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("feat", FEATURES, ids=IDS)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("backend", ["auto", "sm90", "sm80"])
def test_forward_matches_per_sequence_reference(backend, d, feat, causal):
    if backend == "sm90" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 backend needs compute capability 9.0")
    if backend == "sm80" and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the sm80 backend needs compute capability 8.0")
    window, softcap, alibi = feat
    q, k, v, cu_q, cu_k = packed(8, 2, d, torch.bfloat16, gain=2.0 if softcap else 1.0)
    slopes = slopes_for(alibi, 8)
    out, lse = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LQ), max(LK), causal=causal,
                                                window_size=window, softcap=softcap, alibi_slopes=slopes,
                                                return_lse=True, backend=backend)
    ref, ref_lse = reference_out(q, k, v, cu_q, cu_k, causal, window, softcap, slopes, torch.float32)
    lowp, _ = reference_out(q, k, v, cu_q, cu_k, causal, window, softcap, slopes, q.dtype)
    assert not torch.isnan(out).any()
    err, bound = max_err(out, ref), 2 * max_err(lowp, ref) + ATOL[q.dtype]
    assert err <= bound, f"out err {err:.3g} > bound {bound:.3g}"
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite), "lse: -inf rows differ from the reference"
    if finite.any():
        assert (lse[finite] - ref_lse[finite]).abs().max().item() <= 1e-2 + LSE_ATOL


@needs_gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("feat", FEATURES[::2] + FEATURES[3:4], ids=IDS[::2] + IDS[3:4])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("backend", ["auto", "sm80"])
def test_gradients_match_per_sequence_reference(backend, d, feat, causal):
    if d == 256 and causal:
        pytest.skip("one mask kind at D=256 keeps the fp64 references' time down")
    window, softcap, alibi = feat
    q, k, v, cu_q, cu_k = packed(4, 2, d, torch.bfloat16, gain=2.0 if softcap else 1.0)
    # Rows past the last sequence: NaN in, zero gradient out.
    nan = torch.full((3,) + tuple(q.shape[1:]), float("nan"), dtype=q.dtype, device="cuda")
    q = torch.cat([q, nan]).requires_grad_()
    k = torch.cat([k, nan[:, :2]]).requires_grad_()
    v = torch.cat([v, nan[:, :2]]).requires_grad_()
    slopes = slopes_for(alibi, 4)
    dout = torch.randn(q.size(0), 4, d, device="cuda").to(q.dtype)
    out = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LQ), max(LK), causal=causal,
                                           window_size=window, softcap=softcap, alibi_slopes=slopes,
                                           backend=backend)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    ours = {"dq": dq, "dk": dk, "dv": dv}
    refs = {n: torch.zeros_like(t, dtype=torch.float64) for n, t in ours.items()}
    lows = {n: torch.zeros_like(t) for n, t in ours.items()}
    for dtype, acc in ((torch.float64, refs), (q.dtype, lows)):
        parts = per_sequence(lambda qs, ks, vs, s, ds: attention_ext_grads(qs, ks, vs, ds, None, causal, window,
                                                                           softcap, s, dtype),
                             q.detach(), k.detach(), v.detach(), cu_q, cu_k, slopes, dout)
        for i, p in enumerate(parts):
            if p is None:
                continue
            q0, q1, k0, k1 = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
            for name, g, lo, hi in (("dq", p[0], q0, q1), ("dk", p[1], k0, k1), ("dv", p[2], k0, k1)):
                if g is not None:
                    acc[name][lo:hi] = g[0].to(acc[name].dtype)
    for name, t in ours.items():
        assert not torch.isnan(t).any(), f"NaN in {name}"
        n = int(cu_q[-1]) if name == "dq" else int(cu_k[-1])
        assert (t[n:] == 0).all(), f"{name}: rows outside every sequence must be 0"
        err, bound = max_err(t, refs[name]), 2 * max_err(lows[name], refs[name]) + GRAD_ATOL[q.dtype]
        assert err <= bound, f"{name} err {err:.3g} > bound {bound:.3g}"


@needs_gpu
@pytest.mark.parametrize("d", [64, 128])
def test_gradients_deterministic_with_features(d):
    q, k, v, cu_q, cu_k = packed(8, 2, d, torch.bfloat16, gain=2.0)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    slopes = slopes_for("per_seq", 8)
    dout = torch.randn(q.size(0), 8, d, device="cuda").to(q.dtype)
    runs = []
    for _ in range(3):
        out = flashattn.flash_attn_varlen_func(*leaves, cu_q, cu_k, max(LQ), max(LK), causal=True,
                                               window_size=(100, 0), softcap=30.0, alibi_slopes=slopes,
                                               deterministic=True)
        runs.append(torch.autograd.grad(out, leaves, dout))
    for later in runs[1:]:
        for a, b in zip(runs[0], later):
            assert torch.equal(a, b)


@needs_gpu
@needs_custom_op
def test_torch_compile_with_window():
    q, k, v, cu_q, cu_k = packed(4, 2, 64, torch.bfloat16, gain=1.0)
    slopes = slopes_for("per_seq", 4)

    def f(q, k, v):
        return flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LQ), max(LK), causal=True,
                                                window_size=(64, 0), softcap=30.0, alibi_slopes=slopes)

    eager = f(q, k, v)
    compiled = torch.compile(f, fullgraph=True)(q, k, v)
    assert torch.equal(eager, compiled)


@needs_cuda
def test_bad_varlen_features_name_the_argument():
    q, k, v, cu_q, cu_k = packed(4, 2, 64, torch.bfloat16, gain=1.0)
    cases = [({"window_size": (-2, 0)}, ValueError, "window_size"),
             ({"softcap": float("nan")}, ValueError, "softcap"),
             ({"alibi_slopes": torch.ones(3, device="cuda")}, ValueError, "alibi_slopes"),
             ({"alibi_slopes": torch.ones(len(LQ) + 1, 4, device="cuda")}, ValueError, "alibi_slopes"),
             ({"alibi_slopes": torch.ones(4, device="cuda", dtype=torch.float16)}, ValueError, "alibi_slopes")]
    for kw, exc, word in cases:
        with pytest.raises(exc, match=word):
            flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LQ), max(LK), **kw)
