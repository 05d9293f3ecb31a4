"""Timelines of the sm90 kernel from a trace build of the library (-DFLASHATTN_SM90_TRACE=1):
every CTA's consumer warp 0 stamps each piece (start, mainloop end, epilogue end; globaltimer ns).

    run (GPU, trace library in FLASHATTN_LIBRARY):
        python bench/trace_sm90.py run OUT_DIR [--points D:S:causal[:window_left],...]
        -> OUT_DIR/trace-<D>-<S>-<c>-<split|nosplit>.txt (non-causal points run with and without
           the stream-K split)
    report (anywhere): python bench/trace_sm90.py report FILE...

The report gives, per launch: the kernel span, when CTAs finish (first / median / last), the
median whole-tile time, the gap between a CTA's pieces (epilogue end -> next start), and for
split launches the pieces' durations and the tail after the last whole tile.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path


def run(out, points):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import torch
    import flashattn
    out.mkdir(parents=True, exist_ok=True)
    for spec in points:
        # D:S:causal, or D:S:causal:left for a sliding window (left, 0 if causal else left)
        d, s, causal, *win = (int(x) for x in spec.split(":"))
        window = (win[0], 0 if causal else win[0]) if win else (-1, -1)
        b, h = max(1, 16384 // s), 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) + 0.3 for _ in range(3))
        tag = f"{d}-{s}-{causal}" + (f"-w{win[0]}" if win else "")
        for split in ((True,) if causal or win else (True, False)):
            os.environ["FLASHATTN_SM90_STREAM_K"] = "1" if split else "0"
            for _ in range(3):  # warm-up launches (trace appended, the report takes the last)
                os.environ["FLASHATTN_SM90_TRACE_FILE"] = str(out / f"trace-{tag}-{'split' if split else 'nosplit'}.txt")
                flashattn.flash_attn_forward(q, k, v, None, bool(causal), backend="sm90", window_size=window)
            torch.cuda.synchronize()
    os.environ.pop("FLASHATTN_SM90_TRACE_FILE", None)


def launches(path):
    cur = None
    for line in open(path):
        if line.startswith("#"):
            cur = {"head": line[2:].strip(), "ev": []}
            yield cur
        elif cur is not None and line.strip():
            cta, k, code, stored, t0, t1, t2 = (int(x) for x in line.split())
            cur["ev"].append((cta, k, code, stored, t0, t1, t2))


def report(paths):
    for path in paths:
        last = None
        for last in launches(path):
            pass
        if last is None:
            continue
        head = dict(kv.split("=") for kv in last["head"].split()[1:])
        dp = int(head["dp_tiles"])
        ev = last["ev"]
        span = max(e[6] for e in ev) / 1e3
        ends = sorted(max(e[6] for e in ev if e[0] == c) for c in {e[0] for e in ev})
        whole = [(e[6] - e[4]) / 1e3 for e in ev if e[2] < dp]
        main = [(e[5] - e[4]) / 1e3 for e in ev if e[2] < dp]
        by_cta = {}
        for e in ev:
            by_cta.setdefault(e[0], []).append(e)
        gaps = [(b[4] - a[6]) / 1e3 for es in by_cta.values() for a, b in zip(sorted(es, key=lambda e: e[1]),
                                                                            sorted(es, key=lambda e: e[1])[1:])]
        print(f"{Path(path).name}: {last['head']}")
        print(f"  span {span:.1f} us; CTAs end first/median/last {ends[0] / 1e3:.1f} / "
              f"{ends[len(ends) // 2] / 1e3:.1f} / {ends[-1] / 1e3:.1f} us")
        if whole:
            print(f"  whole tiles: {len(whole)}, start->end median {statistics.median(whole):.2f} us "
                  f"(mainloop {statistics.median(main):.2f}), gap between pieces median "
                  f"{statistics.median(gaps) if gaps else 0:.3f} us, max {max(gaps) if gaps else 0:.2f}")
        pieces = [e for e in ev if e[2] >= dp]
        if pieces:
            durs = [(e[6] - e[4]) / 1e3 for e in pieces]
            merge = [(e[6] - e[5]) / 1e3 for e in pieces]
            last_dp_end = sorted(max((e[6] for e in es if e[2] < dp), default=0) for es in by_cta.values())
            print(f"  split pieces: {len(pieces)}, start->end median {statistics.median(durs):.2f} us "
                  f"(max {max(durs):.2f}), after-mainloop (merge/epilogue) median {statistics.median(merge):.2f} "
                  f"max {max(merge):.2f} us; last whole tile ends median {last_dp_end[len(last_dp_end) // 2] / 1e3:.1f}"
                  f" max {last_dp_end[-1] / 1e3:.1f} us; first piece starts {min(e[4] for e in pieces) / 1e3:.1f} us")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--points", default="128:2048:0,128:4096:0,128:2048:1")
    p = sub.add_parser("report")
    p.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args.out, args.points.split(","))
    else:
        report(args.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
