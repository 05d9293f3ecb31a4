#!/usr/bin/env python3
"""Varlen (packed) forward vs the dense forward on the same tokens (issue 16's yardsticks).

Two measurements, bf16, one process, CUDA-graph replays timed with triton's do_bench median:
  equal    B sequences of length S: flash_attn_varlen_func on the packed tokens vs
           flash_attn_func on the (B, S, H, D) batch. Ratio = dense time / varlen time
           (>= 0.97 wanted).
  skewed   one long sequence and many short ones: varlen vs the dense call on the batch padded
           to the longest (what a caller without varlen runs; padding's cost is the padded
           rows' work). Ratio = padded time / varlen time (> 1 wanted).
TFLOPS count the visible pairs of the real sequences only (4 * Sq * Sk * D per head, causal
halved for square sequences), for both columns.

    python bench/varlen.py                      # D=128, causal and not
    python bench/varlen.py --dims 64,128 --backend sm90
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
# compare.py's graph timer (a CUDA-graph replay of one call, do_bench median) and its import of
# flashattn (the repo's python/ package when none is installed).
from compare import bench_ms, flashattn  # noqa: E402


def graph_ms(fn):
    return bench_ms(fn, 25, 200, timer="graph")


def flops(lengths, H, D, causal):
    return sum(4.0 * s * s * D * H / (2 if causal else 1) for s in lengths)


def run(lengths, H, D, causal, backend):
    total = sum(lengths)
    q, k, v = (torch.randn(total, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    S = max(lengths)
    varlen = lambda: flashattn.flash_attn_varlen_func(q, k, v, cu, cu, S, S, causal=causal,  # noqa: E731
                                                      backend=backend)
    B = len(lengths)
    qd, kd, vd = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    dense = lambda: flashattn.flash_attn_func(qd, kd, vd, causal=causal, backend=backend)  # noqa: E731
    with torch.no_grad():
        t_var, t_dense = graph_ms(varlen), graph_ms(dense)
    f = flops(lengths, H, D, causal)
    return t_var, t_dense, f / t_var * 1e-9, f / t_dense * 1e-9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", default="128")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--causal", default="both", choices=["yes", "no", "both"])
    args = ap.parse_args()
    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    skewed = [8192] + [64 + 37 * i % 700 for i in range(63)]
    print(f"{'case':<26}{'D':>5}{'causal':>8}{'varlen ms':>11}{'dense ms':>10}{'varlen TF':>11}{'dense TF':>10}{'ratio':>8}")
    for D in [int(x) for x in args.dims.split(",")]:
        H = 2048 // D
        for causal in causals:
            for name, lengths in (("equal 8x2048", [2048] * 8), ("equal 2x8192", [8192] * 2),
                                  ("equal 32x512", [512] * 32), ("skewed 8192+63 short", skewed)):
                tv, td, fv, fd = run(lengths, H, D, causal, args.backend)
                print(f"{name:<26}{D:>5}{str(causal):>8}{tv:>11.3f}{td:>10.3f}{fv:>11.1f}{fd:>10.1f}{td / tv:>8.3f}")


if __name__ == "__main__":
    main()
