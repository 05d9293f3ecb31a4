#!/usr/bin/env python3
"""Varlen (packed) vs dense on the same tokens (issue 16's yardsticks), forward or backward.

Two measurements, bf16, one process, CUDA-graph replays timed with triton's do_bench median:
  equal    B sequences of length S: flash_attn_varlen_func on the packed tokens vs
           flash_attn_func on the (B, S, H, D) batch. Ratio = dense time / varlen time
           (>= 0.97 wanted).
  skewed   one long sequence and many short ones: varlen vs the dense call on the batch padded
           to the longest (what a caller without varlen runs; padding's cost is the padded
           rows' work). Ratio = padded time / varlen time (> 1 wanted).
TFLOPS count the visible pairs of the real sequences only (4 * Sq * Sk * D per head, causal
halved for square sequences; 2.5x that for the backward), for both columns. --direction bwd
times the backward alone: torch.autograd.grad of an untimed forward's output, retain_graph, as
bench/compare.py --direction bwd does.

    python bench/varlen.py                      # D=128, causal and not
    python bench/varlen.py --dims 64,128 --backend sm90
    python bench/varlen.py --direction bwd
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


def flops(lengths, H, D, causal, direction):
    f = sum(4.0 * s * s * D * H / (2 if causal else 1) for s in lengths)
    return f * (2.5 if direction == "bwd" else 1.0)


def _timed(fn, leaves, direction):
    """(the call to time, the stream to capture it on): the forward under no_grad, or the
    backward of one untimed forward run on a side stream (autograd runs a backward on its
    forward's stream, so the graph is captured there, as bench/compare.py does)."""
    if direction == "fwd":
        def fwd():
            with torch.no_grad():
                return fn(*leaves)
        return fwd, None
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        leaves = [t.detach().requires_grad_() for t in leaves]
        out = fn(*leaves)
        dout = torch.randn_like(out)
    return (lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)), stream


def run(lengths, H, D, causal, backend, direction):
    total = sum(lengths)
    q, k, v = (torch.randn(total, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    S = max(lengths)
    varlen = _timed(lambda q_, k_, v_: flashattn.flash_attn_varlen_func(q_, k_, v_, cu, cu, S, S, causal=causal,
                                                                       backend=backend), (q, k, v), direction)
    B = len(lengths)
    qd, kd, vd = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    dense = _timed(lambda q_, k_, v_: flashattn.flash_attn_func(q_, k_, v_, causal=causal, backend=backend),
                   (qd, kd, vd), direction)
    t_var, t_dense = graph_ms(*varlen), graph_ms(*dense)
    f = flops(lengths, H, D, causal, direction)
    return t_var, t_dense, f / t_var * 1e-9, f / t_dense * 1e-9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", default="128")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--causal", default="both", choices=["yes", "no", "both"])
    ap.add_argument("--direction", default="fwd", choices=["fwd", "bwd"])
    args = ap.parse_args()
    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    skewed = [8192] + [64 + 37 * i % 700 for i in range(63)]
    print(f"direction: {args.direction}")
    print(f"{'case':<26}{'D':>5}{'causal':>8}{'varlen ms':>11}{'dense ms':>10}{'varlen TF':>11}{'dense TF':>10}{'ratio':>8}")
    for D in [int(x) for x in args.dims.split(",")]:
        H = 2048 // D
        for causal in causals:
            for name, lengths in (("equal 8x2048", [2048] * 8), ("equal 2x8192", [8192] * 2),
                                  ("equal 32x512", [512] * 32), ("skewed 8192+63 short", skewed)):
                tv, td, fv, fd = run(lengths, H, D, causal, args.backend, args.direction)
                print(f"{name:<26}{D:>5}{str(causal):>8}{tv:>11.3f}{td:>10.3f}{fv:>11.1f}{fd:>10.1f}{td / tv:>8.3f}")


if __name__ == "__main__":
    main()
