#!/usr/bin/env python3
"""Cost of the sliding window, softcap and ALiBi (issue 17), forward or backward, bf16, one
process, CUDA-graph replays timed with triton's do_bench median.

TFLOPS count the visible (query, key) pairs only: 4 * D per pair per head, so a window's
TFLOPS compare directly with the full causal kernel's (the issue's bar: >= 90% of it at
window (1024, 0), S = 16k). Softcap / ALiBi rows give the time ratio to the same call without
them (the issue's bars: softcap <= 15% at D=128, <= 30% at D=64; ALiBi <= 5%).

    python bench/features.py                 # D = 64, 128; S = 16k (B = 1, H = 2048 / D)
    python bench/features.py --seqlen 8192 --dims 128
    python bench/features.py --direction bwd  # the backward: autograd.grad after an untimed forward

The backward counts 2.5x the forward's FLOPs per visible pair (as compare.py's backward).
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
# compare.py's graph timer (a CUDA-graph replay of one call, do_bench median) and its import of
# flashattn (the repo's python/ package when none is installed).
from compare import bench_ms, flashattn  # noqa: E402


def graph_ms(fn, stream=None):
    return bench_ms(fn, 25, 200, timer="graph", stream=stream)


def visible_pairs(S, causal, left):
    """Pairs (i, j), j in [i - left, i] (causal) or all (non-causal), left = -1 unbounded."""
    if not causal:
        return S * S
    if left < 0:
        return S * (S + 1) // 2
    full = min(left + 1, S)
    return sum(min(i + 1, full) for i in range(S))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--direction", choices=("fwd", "bwd"), default="fwd")
    args = ap.parse_args()
    bwd = args.direction == "bwd"
    S = args.seqlen
    print(f"{'case':<30}{'D':>5}{'ms':>9}{'TFLOPS':>9}{'vs base':>9}")
    for D in [int(x) for x in args.dims.split(",")]:
        H = 2048 // D
        q, k, v = (torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=bwd)
                   for _ in range(3))
        dout = torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16)
        slopes = torch.rand(H, device="cuda", dtype=torch.float32) * 0.1

        def run(name, causal, base=None, **kw):
            call = lambda: flashattn.flash_attn_func(q, k, v, causal=causal, backend=args.backend, **kw)  # noqa: E731
            if bwd:
                # One untimed forward on a side stream; autograd runs its backward on that
                # stream, so the graph is captured there (as compare.py and varlen.py do).
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    out = call()
                fn = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
                ms = graph_ms(fn, stream)
            else:
                with torch.no_grad():
                    ms = graph_ms(call)
            left = kw.get("window_size", (-1, -1))[0]
            flops_per_pair = 4.0 * D * (2.5 if bwd else 1.0)
            tf = flops_per_pair * visible_pairs(S, causal, left) * H / ms * 1e-9
            ratio = f"{ms / base:>9.3f}" if base else f"{'':>9}"
            print(f"{name:<30}{D:>5}{ms:>9.3f}{tf:>9.1f}{ratio}")
            return ms

        causal_ms = run("causal", True)
        run("feature kernel, (-1, 0)", True, base=causal_ms, window_size=(-1, 0))
        for left in (1024, 4096):
            w_ms = run(f"window ({left}, 0)", True, window_size=(left, 0))
            # ALiBi slopes of zero: the same result through the kernels' softcap / ALiBi score
            # pass (the forward: the feature kernel), against which the window-only pass (the
            # forward: the window twin where tile_table.h's window_twin_serves) is timed.
            run("  + zero ALiBi (mods pass)", True, base=w_ms, window_size=(left, 0), alibi_slopes=slopes * 0)
        run("softcap 30, causal", True, base=causal_ms, softcap=30.0)
        # The same calls through the feature kernel (a window that hides nothing): the dense
        # kernels' softcap / ALiBi twins (sm90, D=64 and D=128) are timed against it.
        run("  on the feature kernel", True, base=causal_ms, softcap=30.0, window_size=(-1, 0))
        full_ms = run("full", False)
        run("softcap 30, full", False, base=full_ms, softcap=30.0)
        run("  on the feature kernel", False, base=full_ms, softcap=30.0, window_size=(S, S))
        run("alibi, causal", True, base=causal_ms, alibi_slopes=slopes)
        run("alibi, full", False, base=full_ms, alibi_slopes=slopes)
        run("  on the feature kernel", False, base=full_ms, alibi_slopes=slopes, window_size=(S, S))


if __name__ == "__main__":
    main()
