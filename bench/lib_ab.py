"""A/B of builds of libflashattn (kernel versions) and run-time variants of one build, against
cuDNN, on chosen grid points. A library is loaded with ctypes and called through the C ABI on
torch's current stream. Every variant's output is checked against the fp32 reference before it
is timed, and with --timer graph the captured graph's own output is checked too (the replay
runs the captured launch, workspace nodes included). Rounds alternate the variants so drift hits
them alike. Give one library per process: two builds loaded in one process failed their
launches with "invalid argument" (each carries its own static CUDA runtime); run the script
once per build on a warm machine and compare the ratios to cuDNN.

    python bench/lib_ab.py NAME=PATH [NAME=PATH ...] [--dims 128] [--seqlens 2048,4096]
                           [--causal no|yes|both] [--rounds 3] [--env VAR=VALUE@NAME ...]
                           [--shapes B:Sq:Sk:H:D,...]   (instead of the standard grid)

--env sets an environment variable around one variant's calls (a run-time switch), so one
build can be timed against itself, e.g. the stream-K split on and off:
    python bench/lib_ab.py split=LIB nosplit=LIB --env FLASHATTN_SM90_STREAM_K=0@nosplit
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402

import torch  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

from flashattn import _lib  # noqa: E402  (descriptor struct and signatures)

DT_ID = {torch.float16: 0, torch.bfloat16: 1}


def load(path):
    lib = ctypes.CDLL(str(path))
    tp = ctypes.POINTER(_lib.FlashattnTensor)
    lib.flashattn_forward.argtypes = [tp, tp, tp, tp, ctypes.c_void_p, ctypes.c_float, ctypes.c_int,
                                      ctypes.c_int, ctypes.c_void_p]
    lib.flashattn_forward.restype = ctypes.c_int
    lib.flashattn_last_error.restype = ctypes.c_char_p
    return lib


def desc(t):
    return _lib.make_tensor(t.data_ptr(), DT_ID[t.dtype], t.shape, t.stride())


def variant(lib, q, k, v, out, lse, causal, env, backend=1):
    dq, dk, dv, do = desc(q), desc(k), desc(v), desc(out)

    def run():
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            rc = lib.flashattn_forward(dq, dk, dv, do, lse.data_ptr(), 0.0, int(causal), backend,
                                       torch.cuda.current_stream().cuda_stream)
        finally:
            for key, val in saved.items():
                if val is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = val
        if rc:
            raise RuntimeError(lib.flashattn_last_error().decode())
        return out
    return run


def capture(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("libs", nargs="+", help="NAME=PATH of a libflashattn.so")
    ap.add_argument("--dims", type=compare.ints, default=[128])
    ap.add_argument("--seqlens", type=compare.ints, default=[2048, 4096, 8192])
    ap.add_argument("--causal", default="no", choices=["no", "yes", "both"])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timer", default="graph", choices=["eager", "graph"])
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--env", action="append", default=[], help="VAR=VALUE@NAME")
    ap.add_argument("--shapes", default="", help="B:Sq:Sk:H:D,... instead of the grid")
    ap.add_argument("--backend", type=int, default=1, help="1 sm90 (default), 2 sm80 (flashattn::Backend)")
    args = ap.parse_args(argv)
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    if args.shapes:
        shapes = [tuple(int(x) for x in sh.split(":")) for sh in args.shapes.split(",")]
    else:
        shapes = [(max(1, args.tokens // s), s, s, args.hidden // d, d) for d in args.dims for s in args.seqlens]
    libs, loaded = {}, {}
    for spec in args.libs:
        name, path = spec.split("=", 1)
        libs[name] = loaded.setdefault(path, load(path))
    envs = {name: {} for name in libs}
    for spec in args.env:
        assign, name = spec.rsplit("@", 1)
        key, val = assign.split("=", 1)
        envs[name][key] = val
    names = list(libs) + ["cudnn"]
    print(f"{'D':>4} {'S':>6} {'c':>1} " + " ".join(f"{n:>9}" for n in names) + "   ratios to cuDNN   check")
    bad = 0
    for b, sq, sk, h, d in shapes:
        for causal in causals:
            g = torch.Generator(device="cuda").manual_seed(2)
            q = (torch.randn(b, sq, h, d, device="cuda", generator=g) + 0.3).to(torch.bfloat16)
            k, v = ((torch.randn(b, sk, h, d, device="cuda", generator=g) + 0.3).to(torch.bfloat16)
                    for _ in range(2))
            flops = 4 * b * h * sq * sk * d * (0.5 if causal and sq == sk else 1.0)
            fns, ok, outs, lses = {}, [], {}, {}
            for name, lib in libs.items():
                out = outs[name] = torch.full_like(q, float("nan"))
                lse = lses[name] = torch.full((b, h, sq), float("nan"), device="cuda")
                fns[name] = variant(lib, q, k, v, out, lse, causal, envs[name], args.backend)
                fns[name]()
                torch.cuda.synchronize()
                ok.append(compare.check(out, lse, q, k, v, causal)["pass"])
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            fns["cudnn"] = compare.sdpa_fn(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, causal)
            if args.timer == "graph":  # time (and check) the replay of our own capture
                for name in libs:
                    out = outs[name]
                    g = capture(fns[name])
                    out.fill_(float("nan"))
                    lses[name].fill_(float("nan"))
                    g.replay()
                    torch.cuda.synchronize()
                    ok.append(compare.check(out, lses[name], q, k, v, causal)["pass"])
                    fns[name] = g.replay
            ms = {name: [] for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    timer = "eager" if name in libs else args.timer  # ours: already a replay
                    ms[name].append(compare.bench_ms(fn, args.warmup, args.rep, timer))
            tf = {name: flops / (statistics.median(v) * 1e-3) / 1e12 for name, v in ms.items()}
            bad += not all(ok)
            label = f"{d:>4} {sq:>6}" if sq == sk else f"{d:>4} {b}x{h}x{sq}x{sk}"
            print(f"{label} {int(causal):>1} " + " ".join(f"{tf[n]:9.1f}" for n in names) + "   " +
                  " ".join(f"{tf[n] / tf['cudnn']:.3f}" for n in libs) +
                  ("   ok" if all(ok) else f"   FAIL {ok}"), flush=True)
            del q, k, v
            torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
