"""flash_attn_varlen_func against per-sequence torch references (the correctness rule of
docs/ARCHITECTURE.md on every sequence), plus equality with the dense call on the same tokens,
torch.compile, CUDA-graph capture, strided inputs and error messages; gradients (the varlen
backward) against per-sequence autograd of the torch reference, deterministic mode, and zero
gradients on rows outside every sequence.
Skipped without torch or without a CUDA device.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

import flashattn  # noqa: E402

from _reference import ATOL, GRAD_ATOL, LSE_ATOL, attention, attention_grads, max_err  # noqa: E402

needs_custom_op = pytest.mark.skipif(not flashattn.HAS_CUSTOM_OP, reason="needs torch >= 2.4")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(4321)


def rand(*shape, dtype=torch.bfloat16):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 2 - 0.7).to(dtype)


def packed(lengths_q, lengths_k, hq, hkv, d, dv, dtype):
    cu_q = torch.tensor([0] + list(torch.tensor(lengths_q).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(lengths_k).cumsum(0)), dtype=torch.int32, device="cuda")
    q = rand(int(cu_q[-1]), hq, d, dtype=dtype)
    k = rand(int(cu_k[-1]), hkv, d, dtype=dtype)
    v = rand(int(cu_k[-1]), hkv, dv, dtype=dtype)
    return q, k, v, cu_q, cu_k


def check_per_sequence(out, lse, q, k, v, cu_q, cu_k, causal):
    for i in range(cu_q.numel() - 1):
        q0, q1, k0, k1 = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        if q1 == q0:
            continue
        qs, ks, vs = q[q0:q1][None], k[k0:k1][None], v[k0:k1][None]
        ref, ref_lse = attention(qs, ks, vs, causal=causal)
        lowp, _ = attention(qs, ks, vs, causal=causal, dtype=q.dtype)
        got = out[q0:q1][None]
        bound = 2 * max_err(lowp, ref) + ATOL[q.dtype]
        assert max_err(got, ref) <= bound, f"sequence {i}: {max_err(got, ref)} > {bound}"
        got_lse = lse[:, q0:q1][None]
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(got_lse), finite), f"sequence {i}: lse -inf rows differ"
        if finite.any():
            assert (got_lse[finite] - ref_lse[finite]).abs().max().item() <= 1e-2 + LSE_ATOL


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,dv", [(64, 64), (128, 128), (96, 96), (192, 128), (256, 256)])
def test_matches_per_sequence_reference(causal, d, dv):
    lq = [0, 1, 300, 129, 64, 7]
    lk = [5, 0, 300, 200, 64, 1]
    q, k, v, cu_q, cu_k = packed(lq, lk, 8, 2, d, dv, torch.bfloat16)
    out, lse = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(lk), causal=causal,
                                                return_lse=True)
    assert out.shape == (q.size(0), 8, dv) and lse.shape == (8, q.size(0))
    check_per_sequence(out, lse, q, k, v, cu_q, cu_k, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_equal_lengths_match_dense(causal):
    # Equal lengths: the same tokens as a dense batch (which may split tiles: stream-K's merge
    # rounds differently, so not bitwise).
    B, S, H, D = 3, 512, 4, 128
    q, k, v = rand(B, S, H, D), rand(B, S, H, D), rand(B, S, H, D)
    cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device="cuda")
    out = flashattn.flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu, cu, S, S,
                                           causal=causal)
    dense = flashattn.flash_attn_func(q, k, v, causal=causal)
    assert max_err(out.view(B, S, H, D), dense) <= 1e-2


def test_strided_views_and_fp16():
    lq, lk = [33, 100, 2], [40, 90, 17]
    _, _, _, cu_q, cu_k = packed(lq, lk, 4, 4, 64, 64, torch.float16)
    qkv = rand(int(cu_q[-1]), 3, 4, 64, dtype=torch.float16)  # packed qkv: strided views
    kv = rand(int(cu_k[-1]), 2, 4, 64, dtype=torch.float16)
    q, k, v = qkv[:, 0], kv[:, 0], kv[:, 1]
    out, lse = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 100, 90, causal=True, return_lse=True)
    check_per_sequence(out, lse, q, k, v, cu_q, cu_k, True)


@needs_custom_op
def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    q, k, v, cu_q, cu_k = packed([10, 200, 3], [50, 170, 9], 4, 2, 64, 64, torch.bfloat16)

    def f(q, k, v):
        return flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 200, 170, causal=True) * 2

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(q, k, v), f(q, k, v))


def test_cuda_graph_capture_replay():
    q, k, v, cu_q, cu_k = packed([300, 1, 77], [310, 20, 77], 8, 2, 128, 128, torch.bfloat16)
    f = lambda: flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 300, 310, causal=True)  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        f()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out_g = f()
    q.copy_(rand(*q.shape))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out_g, f())


def test_errors_name_the_argument():
    q, k, v, cu_q, cu_k = packed([4, 4], [4, 4], 2, 2, 64, 64, torch.bfloat16)
    with pytest.raises(ValueError, match="cu_seqlens_q: expected torch.int32"):
        flashattn.flash_attn_varlen_func(q, k, v, cu_q.long(), cu_k, 4, 4)
    with pytest.raises(ValueError, match="cu_seqlens_k: 2 offsets"):
        flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k[:2], 4, 4)
    with pytest.raises(ValueError, match="q: a varlen call takes packed 3-D"):
        flashattn.flash_attn_varlen_func(q[None], k, v, cu_q, cu_k, 4, 4)


def _per_sequence_grads(q, k, v, dout, cu_q, cu_k, causal, dtype):
    """dq, dk, dv of each sequence by the torch reference computed in `dtype`, packed like q, k, v
    (zero outside sequences and where nothing flows)."""
    grads = [torch.zeros(t.shape, dtype=torch.float64, device="cuda") for t in (q, k, v)]
    for i in range(cu_q.numel() - 1):
        q0, q1, k0, k1 = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        if q1 == q0 or k1 == k0:
            continue  # no query or no key: nothing flows, the gradients stay 0
        g = attention_grads(q[q0:q1][None].detach(), k[k0:k1][None].detach(), v[k0:k1][None].detach(),
                            dout[q0:q1][None], causal=causal, dtype=dtype)
        grads[0][q0:q1] = g[0][0].double()
        grads[1][k0:k1] = g[1][0].double()
        grads[2][k0:k1] = g[2][0].double()
    return grads


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128, 96, 256])
def test_gradients_match_per_sequence_reference(causal, d):
    lq = [0, 1, 17, 113, 300, 9]
    lk = [5, 1, 17, 300, 113, 0]  # keys without queries (dk = dv = 0), queries without keys (dq = 0)
    q, k, v, cu_q, cu_k = packed(lq, lk, 8, 2, d, d, torch.bfloat16)
    for t in (q, k, v):
        t.requires_grad_()
    out = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(lk), causal=causal)
    dout = rand(*out.shape)
    out.backward(dout)
    exact = _per_sequence_grads(q, k, v, dout, cu_q, cu_k, causal, torch.float64)
    lowp = _per_sequence_grads(q, k, v, dout, cu_q, cu_k, causal, q.dtype)
    # The rule: max|ours - fp64| <= 2 max|lowp - fp64| + atol (atol scaled by the gradient's size).
    for got, ref, low, name in zip((q.grad, k.grad, v.grad), exact, lowp, ("dq", "dk", "dv")):
        assert torch.isfinite(got).all(), name
        err = (got.double() - ref).abs().max().item()
        bound = 2 * (low - ref).abs().max().item() + GRAD_ATOL[q.dtype] * max(1.0, ref.abs().max().item())
        assert err <= bound, f"{name}: {err} > {bound}"


def test_gradients_deterministic_and_zero_outside():
    q, k, v, cu_q, cu_k = packed([300, 5, 77], [310, 20, 0], 8, 1, 128, 128, torch.bfloat16)
    # Rows past the last sequence (NaN) must not reach any gradient, and get zero gradient.
    pad = torch.full((7, 8, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    q = torch.cat([q, pad]).requires_grad_()
    k = torch.cat([k, pad[:, :1]]).requires_grad_()
    v = torch.cat([v, pad[:, :1]]).requires_grad_()
    dout = rand(q.size(0), 8, 128)
    runs = []
    for _ in range(3):
        q.grad = k.grad = v.grad = None
        out = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 300, 310, causal=True, deterministic=True)
        out.backward(dout)
        runs.append([t.grad.clone() for t in (q, k, v)])
    for later in runs[1:]:
        for a, b in zip(runs[0], later):
            assert torch.equal(a, b)
    for g, n in zip(runs[0], (int(cu_q[-1]), int(cu_k[-1]), int(cu_k[-1]))):
        assert torch.isfinite(g[:n]).all()
        assert (g[n:] == 0).all()


def test_lse_gradient_is_refused():
    q, k, v, cu_q, cu_k = packed([4, 4], [4, 4], 2, 2, 64, 64, torch.bfloat16)
    q.requires_grad_()
    out, lse = flashattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 4, 4, return_lse=True)
    with pytest.raises(NotImplementedError, match="gradient of lse"):
        (out.float().sum() + lse.sum()).backward()
