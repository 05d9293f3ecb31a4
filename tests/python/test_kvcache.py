"""flash_attn_with_kvcache against per-sequence torch references (the correctness rule of
docs/ARCHITECTURE.md on every sequence): contiguous and paged caches, per-sequence lengths
(0 included), new keys appended in place (checked bit for bit, NaN in the slots past the
visible keys), GQA/MQA, causal and not, lse; torch.compile, CUDA-graph replay with a device
cache_seqlens advanced between replays, and error messages.
Skipped without torch or without a CUDA device.
"""
import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

import flashattn  # noqa: E402

from _reference import ATOL, LSE_ATOL, attention, max_err  # noqa: E402

needs_custom_op = pytest.mark.skipif(not flashattn.HAS_CUSTOM_OP, reason="needs torch >= 2.4")

NAN = float("nan")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(2024)


def rand(*shape, dtype=torch.bfloat16):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 2 - 0.7).to(dtype)


def bits(t):
    """A view that compares bit for bit (NaN == NaN)."""
    return t.view(torch.int16)


class Cache:
    """A KV cache as the test sees it: per-sequence logical keys/values (B, capacity, Hkv, D),
    and the tensors handed to the library (the same data, contiguous or scattered into pages
    through a block table that is a random permutation of the pages)."""

    def __init__(self, B, capacity, hkv, d, dv, lens, dtype, page_size=None):
        self.B, self.capacity, self.page_size = B, capacity, page_size
        k = rand(B, capacity, hkv, d, dtype=dtype)
        v = rand(B, capacity, hkv, dv, dtype=dtype)
        for b, n in enumerate(lens):  # slots past the cached keys: NaN, never to be read
            k[b, n:] = NAN
            v[b, n:] = NAN
        self.k_logical, self.v_logical = k, v
        if page_size is None:
            self.block_table = None
            self.k_cache, self.v_cache = k.clone(), v.clone()
        else:
            assert capacity % page_size == 0
            max_pages = capacity // page_size
            num_pages = B * max_pages + 3  # a few pages no sequence owns
            perm = torch.randperm(num_pages, device="cuda")[:B * max_pages]
            self.block_table = perm.view(B, max_pages).to(torch.int32)
            self.k_cache = torch.full((num_pages, page_size, hkv, d), NAN, dtype=dtype,
                                      device="cuda")
            self.v_cache = torch.full((num_pages, page_size, hkv, dv), NAN, dtype=dtype,
                                      device="cuda")
            self.k_cache[self.block_table.long().flatten()] = k.reshape(-1, page_size, hkv, d)
            self.v_cache[self.block_table.long().flatten()] = v.reshape(-1, page_size, hkv, dv)
        # As handed over: the expected state after a call starts from these, so a write into a
        # page no sequence owns (or any other stray write) shows up.
        self.k_init, self.v_init = self.k_cache.clone(), self.v_cache.clone()

    def paged(self, k, v):
        """The library's tensors holding the logical k, v (B, capacity, ...)."""
        if self.block_table is None:
            return k, v
        ek, ev = self.k_init.clone(), self.v_init.clone()
        idx = self.block_table.long().flatten()
        ek[idx] = k.reshape(-1, *ek.shape[1:])
        ev[idx] = v.reshape(-1, *ev.shape[1:])
        return ek, ev

    def expected(self, lens, k_new, v_new):
        """(library k, library v, logical k, logical v) as they must be after appending
        k_new / v_new at lens."""
        k, v = self.k_logical.clone(), self.v_logical.clone()
        if k_new is not None:
            s = k_new.size(1)
            for b, n in enumerate(lens):
                k[b, n:n + s] = k_new[b]
                v[b, n:n + s] = v_new[b]
        return (*self.paged(k, v), k, v)


def check_against_reference(out, lse, q, k_logical, v_logical, visible, causal):
    """Per sequence b: q[b] against the first visible[b] keys of the logical cache."""
    assert torch.isfinite(out).all(), "NaN/inf in out (a slot past the visible keys was read?)"
    for b, L in enumerate(visible):
        if L == 0:  # no key: out 0, lse -inf
            assert (out[b] == 0).all(), f"sequence {b}: no keys, out not 0"
            assert torch.isneginf(lse[b]).all(), f"sequence {b}: no keys, lse not -inf"
            continue
        qs, ks, vs = q[b:b + 1], k_logical[b:b + 1, :L], v_logical[b:b + 1, :L]
        ref, ref_lse = attention(qs, ks, vs, causal=causal)
        lowp, _ = attention(qs, ks, vs, causal=causal, dtype=q.dtype)
        got = out[b:b + 1]
        bound = 2 * max_err(lowp, ref) + ATOL[q.dtype]
        assert max_err(got, ref) <= bound, f"sequence {b} (L={L}): {max_err(got, ref)} > {bound}"
        got_lse = lse[b:b + 1]
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(got_lse), finite), f"sequence {b}: lse -inf rows differ"
        if finite.any():
            assert (got_lse[finite] - ref_lse[finite]).abs().max().item() <= 1e-2 + LSE_ATOL


def run_case(hq, hkv, d, page_size, sq, s_new, causal, dtype=torch.bfloat16, capacity=256):
    B = 5
    lens = [0, 1, 17, 100, capacity - s_new]  # cached keys per sequence (0 included)
    cache = Cache(B, capacity, hkv, d, d, lens, dtype, page_size)
    q = rand(B, sq, hq, d, dtype=dtype)
    k_new = rand(B, s_new, hkv, d, dtype=dtype) if s_new else None
    v_new = rand(B, s_new, hkv, d, dtype=dtype) if s_new else None
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    k_cache, v_cache = cache.k_cache, cache.v_cache
    with torch.no_grad():
        out, lse = flashattn.flash_attn_with_kvcache(
            q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens,
            block_table=cache.block_table, causal=causal, return_softmax_lse=True)
    assert out.shape == (B, sq, hq, d) and out.dtype == dtype
    assert lse.shape == (B, hq, sq) and lse.dtype == torch.float32
    ek, ev, k_log, v_log = cache.expected(lens, k_new, v_new)
    # Only the new slots changed, bit for bit (NaN slots stay NaN).
    assert torch.equal(bits(k_cache), bits(ek)), "k_cache differs from the expected append"
    assert torch.equal(bits(v_cache), bits(ev)), "v_cache differs from the expected append"
    visible = [n + s_new for n in lens]
    check_against_reference(out, lse, q, k_log, v_log, visible, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("s_new", [0, 3], ids=["no_new", "new3"])
@pytest.mark.parametrize("sq", [1, 4], ids=["sq1", "sq4"])
@pytest.mark.parametrize("page_size", [None, 16, 64, 256], ids=["contig", "p16", "p64", "p256"])
@pytest.mark.parametrize("hq,hkv,d", [(32, 8, 128), (8, 1, 64)], ids=["gqa32_8_d128", "mqa8_1_d64"])
def test_matches_per_sequence_reference(hq, hkv, d, page_size, sq, s_new, causal):
    run_case(hq, hkv, d, page_size, sq, s_new, causal)


@pytest.mark.parametrize("page_size", [None, 64], ids=["contig", "p64"])
def test_fp16_and_head_dim_64_vs_128(page_size):
    run_case(16, 4, 64, page_size, 2, 1, True, dtype=torch.float16)
    run_case(16, 16, 128, page_size, 1, 0, False, dtype=torch.float16)


def test_int_cache_seqlens_and_whole_cache():
    B, cap, H, D = 3, 128, 4, 64
    k_cache, v_cache = rand(B, cap, H, D), rand(B, cap, H, D)
    q = rand(B, 1, H, D)
    with torch.no_grad():
        # An int: the same length for every sequence (the C field, no device tensor).
        k_new, v_new = rand(B, 2, H, D), rand(B, 2, H, D)
        before_k, before_v = k_cache.clone(), v_cache.clone()
        out = flashattn.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new,
                                                cache_seqlens=50)
        assert isinstance(out, torch.Tensor)
        before_k[:, 50:52], before_v[:, 50:52] = k_new, v_new
        assert torch.equal(bits(k_cache), bits(before_k))
        assert torch.equal(bits(v_cache), bits(before_v))
        ref, _ = attention(q, k_cache[:, :52], v_cache[:, :52])
        lowp, _ = attention(q, k_cache[:, :52], v_cache[:, :52], dtype=q.dtype)
        assert max_err(out, ref) <= 2 * max_err(lowp, ref) + ATOL[q.dtype]
        # None: the whole cache is visible.
        out = flashattn.flash_attn_with_kvcache(q, k_cache, v_cache)
        ref, _ = attention(q, k_cache, v_cache)
        lowp, _ = attention(q, k_cache, v_cache, dtype=q.dtype)
        assert max_err(out, ref) <= 2 * max_err(lowp, ref) + ATOL[q.dtype]


def test_softmax_scale_and_num_splits():
    B, cap, hq, hkv, D = 2, 1024, 8, 2, 128
    lens = [1000, 333]
    cache = Cache(B, cap, hkv, D, D, lens, torch.bfloat16)
    q = rand(B, 1, hq, D)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    outs = []
    with torch.no_grad():
        for splits in (0, 1, 3):
            outs.append(flashattn.flash_attn_with_kvcache(
                q, cache.k_cache, cache.v_cache, cache_seqlens=seqlens, softmax_scale=0.05,
                num_splits=splits))
    for b, L in enumerate(lens):
        ks, vs = cache.k_logical[b:b + 1, :L], cache.v_logical[b:b + 1, :L]
        ref, _ = attention(q[b:b + 1], ks, vs, softmax_scale=0.05)
        lowp, _ = attention(q[b:b + 1], ks, vs, softmax_scale=0.05, dtype=q.dtype)
        for out in outs:
            assert max_err(out[b:b + 1], ref) <= 2 * max_err(lowp, ref) + ATOL[q.dtype]


def test_strided_views_of_block_table_and_q():
    # A block table that is a column slice of a wider one (rows apart: passed with its row
    # stride), and a q that is a slice of a packed tensor (copied or used as is).
    B, P, hkv, D = 3, 16, 2, 64
    lens = [40, 0, 63]
    cache = Cache(B, 64, hkv, D, D, lens, torch.bfloat16, page_size=P)
    wide = torch.zeros(B, 10, dtype=torch.int32, device="cuda")
    wide[:, 2:6] = cache.block_table
    qkv = rand(B, 1, 3, 8, D)
    q = qkv[:, :, 0]
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        out, lse = flashattn.flash_attn_with_kvcache(
            q, cache.k_cache, cache.v_cache, cache_seqlens=seqlens, block_table=wide[:, 2:6],
            return_softmax_lse=True)
    check_against_reference(out, lse, q, cache.k_logical, cache.v_logical, lens, False)


@needs_custom_op
def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    B, hq, hkv, D, P = 2, 8, 2, 64, 16
    lens = [5, 30]
    cache_a = Cache(B, 64, hkv, D, D, lens, torch.bfloat16, page_size=P)
    k_a, v_a = cache_a.k_cache, cache_a.v_cache
    k_b, v_b = k_a.clone(), v_a.clone()
    q, k_new, v_new = rand(B, 1, hq, D), rand(B, 1, hkv, D), rand(B, 1, hkv, D)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    table = cache_a.block_table

    def f(q, k_cache, v_cache, k, v):
        out, lse = flashattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v,
                                                     cache_seqlens=seqlens, block_table=table,
                                                     causal=True, return_softmax_lse=True)
        return out * 2, lse

    with torch.no_grad():
        got, got_lse = torch.compile(f, fullgraph=True)(q, k_a, v_a, k_new, v_new)
        want, want_lse = f(q, k_b, v_b, k_new, v_new)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_lse, want_lse)
    # The compiled call wrote the caches it was given, as the eager one did.
    assert torch.equal(bits(k_a), bits(k_b)) and torch.equal(bits(v_a), bits(v_b))
    ek, _, _, _ = cache_a.expected(lens, k_new, v_new)
    assert torch.equal(bits(k_a), bits(ek))


@pytest.mark.parametrize("page_size", [None, 64], ids=["contig", "p64"])
def test_cuda_graph_capture_replay_advancing_seqlens(page_size):
    # One decode step captured once; cache_seqlens (device) advances by one between replays,
    # the new token's k/v and q are refilled in place: each replay appends and attends.
    B, cap, hq, hkv, D = 4, 256, 16, 4, 128
    lens = [0, 7, 100, 200]
    cache = Cache(B, cap, hkv, D, D, lens, torch.bfloat16, page_size)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q, k_new, v_new = rand(B, 1, hq, D), rand(B, 1, hkv, D), rand(B, 1, hkv, D)
    k_log, v_log = cache.k_logical.clone(), cache.v_logical.clone()

    def step():
        return flashattn.flash_attn_with_kvcache(
            q, cache.k_cache, cache.v_cache, k_new, v_new, cache_seqlens=seqlens,
            block_table=cache.block_table, causal=True, return_softmax_lse=True)

    with torch.no_grad():
        # Warm up on a side stream on scratch copies (the real caches are only written by
        # the replays below).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            kc, vc = cache.k_cache.clone(), cache.v_cache.clone()
            flashattn.flash_attn_with_kvcache(q, kc, vc, k_new, v_new, cache_seqlens=seqlens,
                                              block_table=cache.block_table, causal=True)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out_g, lse_g = step()
        cur = list(lens)
        for _ in range(3):
            q.copy_(rand(*q.shape))
            k_new.copy_(rand(*k_new.shape))
            v_new.copy_(rand(*v_new.shape))
            g.replay()
            torch.cuda.synchronize()
            for b, n in enumerate(cur):
                k_log[b, n] = k_new[b, 0]
                v_log[b, n] = v_new[b, 0]
            cur = [n + 1 for n in cur]
            check_against_reference(out_g, lse_g, q, k_log, v_log, cur, True)
            seqlens.add_(1)
    ek, ev = cache.paged(k_log, v_log)
    assert torch.equal(bits(cache.k_cache), bits(ek))
    assert torch.equal(bits(cache.v_cache), bits(ev))


def test_errors_name_the_argument():
    B, P, H, D = 2, 16, 2, 64
    cache = Cache(B, 32, H, D, D, [3, 4], torch.bfloat16, page_size=P)
    q, k, v = rand(B, 1, H, D), rand(B, 1, H, D), rand(B, 1, H, D)
    seqlens = torch.tensor([3, 4], dtype=torch.int32, device="cuda")
    kc, vc, table = cache.k_cache, cache.v_cache, cache.block_table
    f = flashattn.flash_attn_with_kvcache
    with torch.no_grad():
        with pytest.raises(ValueError, match="block_table: expected torch.int32"):
            f(q, kc, vc, cache_seqlens=seqlens, block_table=table.long())
        with pytest.raises(ValueError, match="cache_seqlens: expected torch.int32"):
            f(q, kc, vc, cache_seqlens=seqlens.long(), block_table=table)
        with pytest.raises(ValueError, match="cache_seqlens: on device cpu"):
            f(q, kc, vc, cache_seqlens=seqlens.cpu(), block_table=table)
        with pytest.raises(ValueError, match="k_cache: dtype torch.float16 differs"):
            f(q, kc.half(), vc, cache_seqlens=seqlens, block_table=table)
        with pytest.raises(ValueError, match="v: None while k is given"):
            f(q, kc, vc, k, None, cache_seqlens=seqlens, block_table=table)
        with pytest.raises(ValueError, match="cache_seqlens: required"):
            f(q, kc, vc, k, v, block_table=table)
        # A cache the library cannot use in place is refused, not copied (the append would
        # land in the copy): a view whose base is 2 bytes off 16-byte alignment.
        big = rand(B, 32, H, D + 8)
        with pytest.raises(ValueError, match="k_cache: layout .* written in place"):
            f(q, big[..., 1:D + 1], big[..., 1:D + 1].clone(), cache_seqlens=seqlens)
        with pytest.raises(NotImplementedError, match="rotary"):
            f(q, kc, vc, rotary_cos=q, rotary_sin=q, cache_seqlens=seqlens, block_table=table)
        with pytest.raises(NotImplementedError, match="cache_batch_idx"):
            f(q, kc, vc, cache_seqlens=seqlens, cache_batch_idx=seqlens, block_table=table)
        with pytest.raises(ValueError, match="window_size"):
            f(q, kc, vc, cache_seqlens=seqlens, block_table=table, window_size=(-2, 0))
        with pytest.raises(ValueError, match="softcap"):
            f(q, kc, vc, cache_seqlens=seqlens, block_table=table, softcap=-1.0)
        with pytest.raises(ValueError, match="alibi_slopes"):
            f(q, kc, vc, cache_seqlens=seqlens, block_table=table,
              alibi_slopes=torch.ones(3, device="cuda"))
        # The library's own checks come back as ValueError with its message.
        with pytest.raises(ValueError, match="cache_seqlen"):
            f(q, kc, vc, k, v, cache_seqlens=32, block_table=table)  # 32 + 1 > 32 keys
    with pytest.raises(NotImplementedError, match="inference only"):
        f(q.clone().requires_grad_(), kc, vc, cache_seqlens=seqlens, block_table=table)


def test_lse_matches_logsumexp_of_scores():
    # lse is the natural log of sum_j exp(scale * q.k_j) over the visible keys.
    B, cap, H, D = 1, 64, 1, 64
    k_cache, v_cache = rand(B, cap, H, D), rand(B, cap, H, D)
    q = rand(B, 1, H, D)
    with torch.no_grad():
        _, lse = flashattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=20,
                                                   return_softmax_lse=True)
    s = (q[0, 0, 0].float() @ k_cache[0, :20, 0].float().T) / math.sqrt(D)
    assert abs(lse[0, 0, 0].item() - torch.logsumexp(s, 0).item()) <= 1e-2


@pytest.mark.parametrize("mods", [
    dict(window_size=(100, 0)), dict(window_size=(40, 7)), dict(softcap=30.0),
    dict(alibi="heads"), dict(alibi="batch", window_size=(64, 0), softcap=50.0)],
    ids=["window100", "window40_7", "softcap30", "alibi", "all"])
@pytest.mark.parametrize("page_size", [None, 64], ids=["contig", "p64"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_window_softcap_alibi_match_dense_call(mods, page_size, causal):
    """The decode kernel's window / softcap / ALiBi against flash_attn_func on each sequence's
    visible keys with the same modifiers (itself checked against a torch reference in
    test_features.py): both meet the rule, so they agree within twice its bound."""
    B, hq, hkv, d, sq, capacity = 3, 16, 4, 128, 4, 512
    lens = [5, 200, 500]
    cache = Cache(B, capacity, hkv, d, d, lens, torch.bfloat16, page_size)
    scale = 3.0 if "softcap" in mods else 1.0  # scores large enough for the cap to bend
    q = rand(B, sq, hq, d) * scale
    k_new, v_new = rand(B, 2, hkv, d), rand(B, 2, hkv, d)
    kw = dict(mods)
    alibi = kw.pop("alibi", None)
    if alibi == "heads":
        kw["alibi_slopes"] = torch.rand(hq, device="cuda") * 0.2
    elif alibi == "batch":
        kw["alibi_slopes"] = torch.rand(B, hq, device="cuda") * 0.2
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        out, lse = flashattn.flash_attn_with_kvcache(
            q, cache.k_cache, cache.v_cache, k_new, v_new, cache_seqlens=seqlens,
            block_table=cache.block_table, causal=causal, return_softmax_lse=True, **kw)
        _, _, k_log, v_log = cache.expected(lens, k_new, v_new)
        for b, n in enumerate(lens):
            L = n + 2
            kb = dict(kw)
            if alibi == "batch":
                kb["alibi_slopes"] = kw["alibi_slopes"][b]
            want, want_lse = flashattn.flash_attn_func(
                q[b:b + 1], k_log[b:b + 1, :L], v_log[b:b + 1, :L], causal=causal,
                return_lse=True, **kb)
            err = (out[b:b + 1].float() - want.float()).abs().max().item()
            assert err <= 3e-2, f"sequence {b}: {err}"
            finite = torch.isfinite(want_lse)
            assert torch.equal(torch.isfinite(lse[b:b + 1]), finite)
            if finite.any():
                assert (lse[b:b + 1][finite] - want_lse[finite]).abs().max().item() <= 5e-2
