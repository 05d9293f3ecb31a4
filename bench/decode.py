#!/usr/bin/env python3
"""Decode at the memory roofline: flash_attn_with_kvcache vs torch SDPA (cuDNN, FlashAttention).

One decode step (default B=64, Sq=1, Hq=32, Hkv=8, D=Dv=128, every sequence with L=8192 cached
keys, bf16, non-causal) is timed as CUDA-graph replays with triton's do_bench median, for:
  flashattn contiguous     cache (B, L, Hkv, D), device cache_seqlens = L;
  flashattn paged          the same keys in pages of --page-size rows, scattered through a
                           random block_table (a permutation of the pages);
  flashattn paged+append   as paged, with one new key/value per sequence written into the cache
                           first (cache_seqlens = L - 1, so L keys are read): a real decode step;
  sdpa cudnn / sdpa flash  torch.nn.functional.scaled_dot_product_attention restricted to one
                           backend (torch.nn.attention.sdpa_kernel) on the dense cache: q
                           (B, Hq, Sq, D), k/v the (B, Hkv, L, D) views of the contiguous cache
                           with enable_gqa=True; where the backend refuses that, k/v made
                           contiguous, then k/v expanded to Hq heads (materialized; it then reads
                           Hq/Hkv times the bytes, which the GB/s column does not count); 'n/a'
                           when it refuses all three.
GB/s counts the K/V bytes a step must read, B * L * Hkv * (D + Dv) * 2 (bf16), for every row (q,
out and the appended key are negligible). "% copy" relates that to the device's copy bandwidth
measured in the same run: dst.copy_(src) of a 2 GiB bf16 tensor, counted as bytes read plus
bytes written (2 * 2 GiB) over the median time. "vs best SDPA" is, for our rows, the best SDPA
row's time over ours (= our GB/s over its GB/s; > 1: faster).

    python bench/decode.py
    python bench/decode.py --batch 8 --seqlen 32768 --page-size 16 --sq 4
"""
import argparse
import math
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
# compare.py's graph timer (a CUDA-graph replay of one call, do_bench median) and its import of
# flashattn (the repo's python/ package when none is installed).
from compare import bench_ms, flashattn  # noqa: E402


def graph_ms(fn):
    return bench_ms(fn, 25, 200, timer="graph")


def copy_bandwidth_gbs():
    """Device copy bandwidth, GB/s: bytes read + bytes written over the median copy time."""
    n = 1 << 30  # bf16 elements: 2 GiB
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda").fill_(1.0)
    dst = torch.empty_like(src)
    ms = graph_ms(lambda: dst.copy_(src))
    moved = 2 * src.numel() * src.element_size()
    return moved / (ms * 1e-3) * 1e-9, ms


def read_bandwidth_gbs():
    """Device read bandwidth, GB/s: a sum over a 2 GiB bf16 tensor (reads only, like decode's
    K/V stream; the copy above measured well below it on the H200)."""
    src = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda").fill_(1.0)
    ms = graph_ms(lambda: src.sum(dtype=torch.float32))
    return src.numel() * src.element_size() / (ms * 1e-3) * 1e-9, ms


def sdpa_variants(q_cache_layout, k_cache, v_cache, hq):
    """(label, q, k, v, enable_gqa) to try in order, each built only when reached."""
    qt = q_cache_layout.transpose(1, 2)  # (B, Hq, Sq, D)
    kt, vt = k_cache.transpose(1, 2), v_cache.transpose(1, 2)  # (B, Hkv, L, D) views
    yield "gqa, views", qt, kt, vt, True
    yield "gqa, contiguous", qt.contiguous(), kt.contiguous(), vt.contiguous(), True
    r = hq // k_cache.size(2)
    yield ("expanded", qt.contiguous(), kt.repeat_interleave(r, dim=1),
           vt.repeat_interleave(r, dim=1), False)


def time_sdpa(backend, q, k_cache, v_cache, hq):
    """(ms, variant label, out in (B, Sq, Hq, Dv)) or (None, reason, None) when refused."""
    last = "refused"
    for label, qt, kt, vt, gqa in sdpa_variants(q, k_cache, v_cache, hq):
        def run(qt=qt, kt=kt, vt=vt, gqa=gqa):
            with sdpa_kernel(backend):
                if gqa:
                    return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
                return F.scaled_dot_product_attention(qt, kt, vt)
        try:
            with warnings.catch_warnings():  # a refusing backend warns why, at length
                warnings.simplefilter("ignore")
                out = run()  # eagerly first: a refusal raises here, not inside a capture
            torch.cuda.synchronize()
        except (RuntimeError, TypeError, ValueError) as e:  # no kernel for this shape/layout
            last = f"{label}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:80]}"
            continue
        try:
            ms = graph_ms(run)
        except RuntimeError as e:
            return None, f"{label}: graph capture failed: {str(e)[:80]}", None
        return ms, label, out.transpose(1, 2)
    return None, last, None


def build_paged(k_cache, v_cache, page_size, gen):
    """The contiguous cache's keys/values scattered into pages through a random block table."""
    B, L, hkv, d = k_cache.shape
    dv = v_cache.size(3)
    max_pages = math.ceil(L / page_size)
    num_pages = B * max_pages
    table = torch.randperm(num_pages, device="cuda", generator=gen).view(B, max_pages)
    k_paged = torch.empty((num_pages, page_size, hkv, d), dtype=k_cache.dtype, device="cuda")
    v_paged = torch.empty((num_pages, page_size, hkv, dv), dtype=v_cache.dtype, device="cuda")
    idx = table.flatten()
    for src, dst in ((k_cache, k_paged), (v_cache, v_paged)):
        padded = torch.zeros((B, max_pages * page_size) + tuple(src.shape[2:]), dtype=src.dtype,
                             device="cuda")
        padded[:, :L] = src
        dst[idx] = padded.view(num_pages, page_size, *src.shape[2:])
        del padded
    return k_paged, v_paged, table.to(torch.int32)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seqlen", type=int, default=8192, help="cached keys per sequence (L)")
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128, help="head dim of q, k and v")
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--sq", type=int, default=1, help="query tokens per sequence")
    ap.add_argument("--backend", default="auto", help="flashattn backend: auto | sm90 | sm80")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("decode.py: no CUDA device", file=sys.stderr)
        return 1
    B, L, hq, hkv, D, Sq, P = (args.batch, args.seqlen, args.hq, args.hkv, args.dim, args.sq,
                               args.page_size)
    if min(B, L, hq, hkv, D, Sq, P) < 1 or hq % hkv:
        ap.error("sizes must be >= 1 and --hq a multiple of --hkv")
    Dv = D
    dt = torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.float32, generator=gen).to(dt)

    kv_bytes = B * L * hkv * (D + Dv) * 2
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"cuDNN {torch.backends.cudnn.version()}  libflashattn {flashattn.library_version()}")
    print(f"decode: B={B} Sq={Sq} Hq={hq} Hkv={hkv} D=Dv={D} L={L} bf16 non-causal, "
          f"page {P}; K/V read per step {kv_bytes / 1e9:.3f} GB")
    copy_gbs, copy_ms = copy_bandwidth_gbs()
    torch.cuda.empty_cache()  # the copy's 4 GiB back before the caches are made
    print(f"copy bandwidth: {copy_gbs:.0f} GB/s (read + written, 2 GiB tensor, {copy_ms:.3f} ms)")
    read_gbs, read_ms = read_bandwidth_gbs()
    torch.cuda.empty_cache()
    print(f"read bandwidth: {read_gbs:.0f} GB/s (torch.sum of a 2 GiB tensor, {read_ms:.3f} ms)")
    print()

    q = rnd(B, Sq, hq, D)
    k_cache, v_cache = rnd(B, L, hkv, D), rnd(B, L, hkv, Dv)
    seqlens = torch.full((B,), L, dtype=torch.int32, device="cuda")
    k_paged, v_paged, table = build_paged(k_cache, v_cache, P, gen)
    k_new, v_new = rnd(B, 1, hkv, D), rnd(B, 1, hkv, Dv)
    seqlens_append = seqlens - 1

    rows, outs = [], {}
    with torch.no_grad():
        ours = {
            "flashattn contiguous": lambda: flashattn.flash_attn_with_kvcache(
                q, k_cache, v_cache, cache_seqlens=seqlens, backend=args.backend),
            f"flashattn paged p{P}": lambda: flashattn.flash_attn_with_kvcache(
                q, k_paged, v_paged, cache_seqlens=seqlens, block_table=table,
                backend=args.backend),
            # Writes the same slot (L - 1) on every replay: the cache's content stays fixed.
            f"flashattn paged+append p{P}": lambda: flashattn.flash_attn_with_kvcache(
                q, k_paged, v_paged, k_new, v_new, cache_seqlens=seqlens_append,
                block_table=table, backend=args.backend),
        }
        for name, fn in ours.items():
            outs[name] = fn()
            rows.append((name, graph_ms(fn), ""))
        sdpa_ms = []
        for name, backend in (("sdpa cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("sdpa flash", SDPBackend.FLASH_ATTENTION)):
            ms, note, out = time_sdpa(backend, q, k_cache, v_cache, hq)
            rows.append((name, ms, note))
            if ms is not None:
                sdpa_ms.append(ms)
                outs[name] = out
            torch.cuda.empty_cache()

    # Same keys everywhere (paged+append's new key differs: not compared).
    base = outs["flashattn contiguous"].float()
    diffs = [f"{n}: {(o.float() - base).abs().max().item():.2e}" for n, o in outs.items()
             if "append" not in n and n != "flashattn contiguous"]
    print("max |out - flashattn contiguous|: " + ("; ".join(diffs) if diffs else "-"))
    print()

    best = min(sdpa_ms) if sdpa_ms else None
    print(f"{'impl':<30}{'ms':>9}{'GB/s':>9}{'% copy':>9}{'% read':>9}{'vs best SDPA':>14}  note")
    for name, ms, note in rows:
        if ms is None:
            print(f"{name:<30}{'n/a':>9}{'n/a':>9}{'n/a':>9}{'n/a':>9}{'':>14}  {note}")
            continue
        gbs = kv_bytes / (ms * 1e-3) * 1e-9
        ratio = f"{best / ms:.2f}x" if (best is not None and name.startswith("flashattn")) else ""
        print(f"{name:<30}{ms:>9.4f}{gbs:>9.0f}{100 * gbs / copy_gbs:>8.1f}%{100 * gbs / read_gbs:>8.1f}%"
              f"{ratio:>14}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
