"""A/B of the sm90 stream-K tail (V14) in one process: ours with the split, ours without it
(FLASHATTN_SM90_STREAM_K=0, read by the library per call) and cuDNN, on the standard grid's
non-causal points, each checked against the fp32 reference first, all timed the same way
(bench/compare.py's bench_ms, CUDA-graph replays by default). Rounds alternate the variants so
drift hits them alike; the table shows medians over rounds.

    python bench/stream_k_ab.py [--dims 128] [--seqlens 2048,4096] [--rounds 2] [--timer graph]
    python bench/stream_k_ab.py --shapes 1:128:32768:16:128,...   (B:Sq:Sk:H:D, e.g. split-KV)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (bench/compare.py: the yardstick's timer, reference check, SDPA)

import torch  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

flashattn = compare.flashattn


def ours(q, k, v, split):
    def run():
        os.environ["FLASHATTN_SM90_STREAM_K"] = "1" if split else "0"
        try:
            return flashattn.flash_attn_forward(q, k, v, None, False, backend="sm90")
        finally:
            os.environ.pop("FLASHATTN_SM90_STREAM_K", None)
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=compare.ints, default=[64, 128, 256])
    ap.add_argument("--seqlens", type=compare.ints, default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timer", default="graph", choices=["eager", "graph"])
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--shapes", default="", help="B:Sq:Sk:H:D,... instead of the grid")
    args = ap.parse_args(argv)
    if args.shapes:
        points = [tuple(int(x) for x in sh.split(":")) for sh in args.shapes.split(",")]
    else:
        points = [(max(1, args.tokens // s), s, s, args.hidden // d, d) for d in args.dims for s in args.seqlens]
    dt = torch.bfloat16
    print(f"{'D':>4} {'S':>6} {'split':>7} {'no split':>8} {'cuDNN':>7} {'split/no':>8} "
          f"{'split/cuDNN':>11} {'no/cuDNN':>8}  check")
    bad = 0
    for b, sq, sk, h, d in points:
        g = torch.Generator(device="cuda").manual_seed(1)
        q = (torch.randn(b, sq, h, d, device="cuda", generator=g) + 0.3).to(dt)
        k, v = ((torch.randn(b, sk, h, d, device="cuda", generator=g) + 0.3).to(dt) for _ in range(2))
        flops = 4 * b * h * sq * sk * d
        ok = []
        for split in (True, False):
            out, lse = ours(q, k, v, split)()
            torch.cuda.synchronize()
            ok.append(compare.check(out, lse, q, k, v, False)["pass"])
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        fns = {"split": ours(q, k, v, True), "nosplit": ours(q, k, v, False),
               "cudnn": compare.sdpa_fn(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, False)}
        ms = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                ms[name].append(compare.bench_ms(fn, args.warmup, args.rep, args.timer))
        tf = {name: flops / (statistics.median(v) * 1e-3) / 1e12 for name, v in ms.items()}
        check = "ok" if all(ok) else f"FAIL {ok}"
        bad += not all(ok)
        label = f"{d:>4} {sq:>6}" if sq == sk else f"{d:>4} {b}x{h}x{sq}x{sk}"
        print(f"{label} {tf['split']:7.1f} {tf['nosplit']:8.1f} {tf['cudnn']:7.1f} "
              f"{tf['split'] / tf['nosplit']:8.3f} {tf['split'] / tf['cudnn']:11.3f} "
              f"{tf['nosplit'] / tf['cudnn']:8.3f}  {check}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
