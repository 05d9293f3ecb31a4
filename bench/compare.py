#!/usr/bin/env python3
"""Side-by-side benchmark: flashattn vs cuDNN vs FlashAttention-2 (PyTorch SDPA backends),
forward, backward, or both.

For every point of the standard grid (batch*seqlen = 16k tokens, H = 2048/D, D in {64,128,256},
seqlen 512..16k, causal and not, bf16) plus the seed shape (B=1, H=64, S=1024, D=128, fp16,
non-causal), it first checks our output against an fp32 torch reference
(max|out-ref| <= 2*max|out_lowp-ref| + atol, lse too); a wrong point is marked FAIL and not timed.
Then it times ours, cuDNN and FA2 on the same tensors in this process with
triton.testing.do_bench medians, prints a table, and writes JSON + a bar chart PNG to --out.

--direction picks what is timed (default fwd):
  fwd     the forward (out, lse), as always;
  bwd     the backward alone: the forward runs once untimed, then autograd.grad(out, (q, k, v),
          dout) is timed (bench/_bwd_compare.py says how each library's backward is isolated);
  fwdbwd  forward and backward in one call, as a training step runs them.
In bwd/fwdbwd the check also compares our dq, dk, dv with an fp32 reference (the same rule).

--dv N gives v (and out, dout) head dim N while q and k keep D (e.g. --dims 192 --dv 128); the
default is D. H stays hidden / D. An SDPA backend that refuses the shape (PyTorch's FA2 wants
equal head dims) is reported n/a with PyTorch's reason; ours is still checked and timed.

FLOPs = 4*B*H*Sq*Sk*D for the forward, halved for causal (Sq == Sk); the backward counts 2.5x
that and forward+backward 3.5x (FlashAttention's convention). With --dv the forward's
4*B*H*Sq*Sk*D becomes 2*B*H*Sq*Sk*(D + Dv) (QK^T over D, PV over Dv), the same number when
Dv == D.

    python bench/compare.py                  # full grid, backend auto, docs/perf/
    python bench/compare.py --quick          # a few points
    python bench/compare.py --backend sm90 --dims 128 --seqlens 1024,4096 --causal no
    python bench/compare.py --impls cudnn --dims 128 --seqlens 2048 --causal no --no-seed
                                             # cuDNN alone (e.g. under ncu: scripts/profile-sm90.sh)
    python bench/compare.py --direction bwd --timer graph --quick
                                             # backward kernels only, vs cuDNN's and FA2's
    python bench/compare.py --timer graph --dims 192 --dv 128 --no-seed
                                             # q/k head dim 192, v/out 128 (-d192v128 files)
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

try:
    import flashattn  # installed package
except ImportError:
    sys.path.insert(0, str(REPO / "python"))
    import flashattn

import torch
import torch.nn.functional as F
import triton
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))  # when imported rather than run
import _bwd_compare as bwd  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
ATOL = {torch.float16: 2e-4, torch.bfloat16: 1e-3}
LSE_ATOL = 1e-3


# ----------------------------------------------------------------------------- environment

def _driver_version():
    try:
        v = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        return f"{v.value // 1000}.{(v.value % 1000) // 10}"
    except OSError:
        return None


def _nvidia_smi():
    if not shutil.which("nvidia-smi"):
        return {}
    fields = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                              "-i", str(torch.cuda.current_device())],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    vals = [x.strip() for x in out.split(",")]
    return dict(zip(fields.split(","), vals)) if len(vals) == len(fields.split(",")) else {}


def environment():
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    smi = _nvidia_smi()
    try:
        lib = str(flashattn.find_library())
        libver = flashattn.library_version()
    except (OSError, FileNotFoundError) as e:
        lib, libver = f"not found: {e}", None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "driver": smi.get("driver_version") or _driver_version(),
        "cuda_driver_api": _driver_version(),
        "clocks": {k: v for k, v in smi.items() if k != "driver_version"},
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "triton": triton.__version__,
        "python": platform.python_version(),
        "flashattn": flashattn.__version__,
        "libflashattn": libver,
        "libflashattn_path": lib,
    }


# ----------------------------------------------------------------------------- reference

def _ref_chunk(q, k, v, causal, dtype):
    """q (b, h, Sq, D), k (b, h, Sk, D), v (b, h, Sk, Dv) -> out (b, h, Sq, Dv) in dtype, lse
    (b, h, Sq) fp32; the scale is 1/sqrt(D), q's head dim."""
    Sq, Sk, D = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.matmul(q.to(dtype), k.to(dtype).transpose(-1, -2)) * (1.0 / math.sqrt(D))
    if causal:
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (Sk - Sq), float("-inf"))
    lse = torch.logsumexp(s.float(), dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0).to(dtype)
    return torch.matmul(p, v.to(dtype)), lse


def check(out, lse, q, k, v, causal, budget_bytes=2 << 30):
    """Errors of out/lse vs the fp32 reference next to the low-precision naive yardstick,
    computed in (batch, head) chunks so 16k-long rows fit in memory. q/k (B, S, H, D), v and
    out (B, S, H, Dv)."""
    B, Sq, H, D = q.shape
    Sk = k.shape[1]
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    ot = out.transpose(1, 2)
    per_head = Sq * Sk * 4 * 3  # fp32 scores + probabilities + slack
    hc = max(1, min(H, budget_bytes // per_head))
    err = lowp_err = lse_err = lse_lowp_err = 0.0
    for b in range(B):
        for h0 in range(0, H, hc):
            sl = (slice(b, b + 1), slice(h0, h0 + hc))
            ref, lse_ref = _ref_chunk(qt[sl], kt[sl], vt[sl], causal, torch.float32)
            low, lse_low = _ref_chunk(qt[sl], kt[sl], vt[sl], causal, q.dtype)
            err = max(err, (ot[sl].float() - ref).abs().max().item())
            lowp_err = max(lowp_err, (low.float() - ref).abs().max().item())
            lse_err = max(lse_err, _inf_safe_err(lse[sl], lse_ref))
            lse_lowp_err = max(lse_lowp_err, _inf_safe_err(lse_low, lse_ref))
            del ref, low, lse_ref, lse_low
    bound = 2 * lowp_err + ATOL[q.dtype]
    lse_bound = 2 * lse_lowp_err + LSE_ATOL
    ok = (err <= bound and lse_err <= lse_bound and not torch.isnan(out).any().item())
    return {"pass": ok, "out_err": err, "out_bound": bound, "lse_err": lse_err,
            "lse_bound": lse_bound}


def _inf_safe_err(a, b):
    d = torch.where(a == b, torch.zeros_like(a), (a.float() - b.float()).abs())
    return d.max().item() if d.numel() else 0.0


def max_err_vs_ref(out, q, k, v, causal):
    """max|out - ref_fp32| for an SDPA output (B, S, H, Dv), chunked like check()."""
    B, Sq, H, D = q.shape
    Sk = k.shape[1]
    qt, kt, vt, ot = (t.transpose(1, 2) for t in (q, k, v, out))
    hc = max(1, min(H, (2 << 30) // (Sq * Sk * 4 * 3)))
    err = 0.0
    for b in range(B):
        for h0 in range(0, H, hc):
            sl = (slice(b, b + 1), slice(h0, h0 + hc))
            ref, _ = _ref_chunk(qt[sl], kt[sl], vt[sl], causal, torch.float32)
            err = max(err, (ot[sl].float() - ref).abs().max().item())
    return err


# ----------------------------------------------------------------------------- timing

def bench_ms(fn, warmup, rep, timer="eager", stream=None):
    """do_bench median of fn. timer="graph" times a CUDA-graph replay of one call instead, so
    the host-side cost of the call (Python, dispatch, ctypes) drops out and kernels are
    compared with kernels; every implementation is timed the same way. stream: where fn's work
    must be captured (a backward runs on its forward's stream); None = a fresh side stream."""
    if timer == "graph":
        side = stream if stream is not None else torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()  # warm-up outside capture (lazy init, cuDNN plan building)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            fn()
        fn = g.replay
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def sdpa_fn(backend, qt, kt, vt, causal):
    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return run


def check_ours(row, q, k, v, causal, backend, dout=None, deterministic=False):
    """Runs ours once and checks it against the fp32 reference (the gradients too when dout is
    given); sets row's status."""
    try:
        row["resolved"] = flashattn.which_backend(q, k, v, causal=causal, backend=backend)
        out, lse = flashattn.flash_attn_forward(q, k, v, None, causal, backend=backend)
        torch.cuda.synchronize()
        row["check"] = check(out, lse, q, k, v, causal)
        ok = row["check"]["pass"]
        del out, lse
        if dout is not None:
            row["resolved_bwd"] = flashattn.which_backward_backend(
                q, k, v, causal=causal, deterministic=deterministic, backend=backend)
            grads = bwd.ours_grads(q, k, v, dout, causal, flashattn, backend, deterministic)
            torch.cuda.synchronize()
            row["grad_check"] = bwd.check_grads(grads, q, k, v, dout, causal)
            ok = ok and row["grad_check"]["pass"]
        row["status"] = "ok" if ok else "FAIL"
    except (ValueError, NotImplementedError, RuntimeError) as e:
        row["status"] = "ERROR"
        row["error"] = f"{type(e).__name__}: {e}"


def timed_fn(name, args, q, k, v, dout, causal):
    """(callable, capture stream) timing `name` in args.direction on these tensors."""
    if args.direction == "fwd":
        if name == "ours":
            return (lambda: flashattn.flash_attn_forward(q, k, v, None, causal,
                                                         backend=args.backend)), None
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, S, D) views for SDPA
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}[name]
        return sdpa_fn(backend, qt, kt, vt, causal), None
    if args.direction == "bwd":
        # The forward runs once here, on the stream the graph timer will capture on.
        stream = torch.cuda.Stream() if args.timer == "graph" else None
        return bwd.make_bwd_fn(name, q, k, v, dout, causal, flashattn, args.backend,
                               args.deterministic, stream), stream
    return bwd.make_fwdbwd_fn(name, q, k, v, dout, causal, flashattn, args.backend,
                              args.deterministic), None


# The header line PyTorch warns before the reasons one SDPA backend was not picked ("Flash
# attention kernel not used because:", "CuDNN attention kernel not used because:") names it so.
_SDPA_WARN_NAME = {"cudnn": "cudnn", "fa2": "flash"}
_rewarned = set()  # warnings re-issued after a successful run, each once (as by default)


def sdpa_refusal_reasons(messages, name):
    """The reasons among the warning texts `messages` that PyTorch gave for not running `name`'s
    SDPA backend (when no kernel is available it warns, per backend, a header line and then its
    reasons, then raises "No available kernel"): the lines under `name`'s header, or every
    non-header line when no header names it. "(Triggered internally at ...)" tails dropped."""
    lines = [m.split(" (Triggered internally")[0].strip() for m in messages]
    mine, others, inside = [], [], False
    for line in lines:
        if line.lower().endswith("not used because:"):
            inside = _SDPA_WARN_NAME[name] in line.lower()
            continue
        if line:
            (mine if inside else others).append(line)
    return mine or others


def _error_text(e, reasons=()):
    text = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
    if reasons:
        text += " [" + "; ".join(dict.fromkeys(reasons)) + "]"
    return text[:600]


def run_point(pt, args):
    B, S, H, D, causal, dtype = pt["B"], pt["S"], pt["H"], pt["D"], pt["causal"], pt["dtype"]
    Dv = pt.get("Dv", D)  # v's, out's and dout's head dim
    dt = DTYPES[dtype]
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(d):
        return (torch.randn(B, S, H, d, device="cuda", generator=g) + 0.3).to(dt)

    q, k, v = rnd(D), rnd(D), rnd(Dv)
    # The gradient flowing into out, for the backward directions (same for every library).
    dout = None if args.direction == "fwd" else torch.randn(
        B, S, H, Dv, device="cuda", generator=g).to(dt)
    flops = bwd.flops(B, H, S, S, D, causal, args.direction, Dv)
    row = dict(pt, direction=args.direction, flops=flops)
    if "ours" in args.impls:
        check_ours(row, q, k, v, causal, args.backend, dout, args.deterministic)
    else:
        row["status"] = "skipped"  # nothing of ours runs: neither checked nor timed
    for name in ("ours", "cudnn", "fa2"):
        row[f"{name}_ms"] = row[f"{name}_tflops"] = None
        if name not in args.impls or (name == "ours" and row["status"] != "ok"):
            continue
        # An SDPA backend's refusal (e.g. FA2 with Dv != D) is a RuntimeError "No available
        # kernel" whose reasons PyTorch gives only as warnings: recorded here, kept in the error.
        caught = None
        try:
            with (warnings.catch_warnings(record=True) if name != "ours"
                  else contextlib.nullcontext()) as caught:
                if caught is not None:
                    warnings.simplefilter("always")
                fn, stream = timed_fn(name, args, q, k, v, dout, causal)
                if name != "ours" and args.check_sdpa:
                    res = fn()
                    torch.cuda.synchronize()
                    if args.direction == "fwd":
                        row[f"{name}_err"] = max_err_vs_ref(res.transpose(1, 2), q, k, v, causal)
                    else:
                        row[f"{name}_grad_err"] = bwd.grad_errors(res, q, k, v, dout, causal)[0]
                    del res
                ms = bench_ms(fn, args.warmup, args.rep, args.timer, stream)
                row[f"{name}_ms"] = ms
                row[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12
                del fn
        except Exception as e:  # an SDPA backend that does not take this shape: n/a
            reasons = sdpa_refusal_reasons([str(w.message) for w in caught], name) if (
                caught and name != "ours") else ()
            row[f"{name}_error"] = _error_text(e, reasons)
        else:
            for w in caught or ():  # a run that worked: its warnings go out as they would have
                key = (str(w.message), w.category, w.filename, w.lineno)
                if key not in _rewarned:
                    _rewarned.add(key)
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    for other in ("cudnn", "fa2"):
        a, b = row["ours_tflops"], row[f"{other}_tflops"]
        row[f"ours_over_{other}"] = a / b if a and b else None
    del q, k, v, dout
    torch.cuda.empty_cache()
    return row


# ----------------------------------------------------------------------------- grid / output

def grid(args):
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    pts = []
    for d in args.dims:
        for s in args.seqlens:
            for c in causals:
                pt = {"label": "grid", "B": max(1, args.tokens // s), "S": s,
                      "H": args.hidden // d, "D": d, "causal": c, "dtype": args.dtype}
                if args.dv is not None:  # only then: rows without --dv are as they were
                    pt["Dv"] = args.dv
                pts.append(pt)
    if not args.no_seed:
        pts.append({"label": "seed", "B": 1, "S": 1024, "H": 64, "D": 128, "causal": False,
                    "dtype": "fp16"})
    return pts


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def tflops_cell(r, name):
    """`name`'s TFLOPS in row r, "n/a" where it failed to run (r[name_error]), "-" where not run."""
    return "n/a" if r.get(f"{name}_error") else fmt(r[f"{name}_tflops"])


def head_dims(r):
    """"192v128" for q/k head dim 192 and v's 128; just "128" when they are equal."""
    dv = r.get("Dv", r["D"])
    return str(r["D"]) if dv == r["D"] else f"{r['D']}v{dv}"


def print_table(rows):
    dw = max([4] + [len(head_dims(r)) for r in rows])
    hdr = (f"{'point':<6} {'dtype':<5} {'D':>{dw}} {'S':>6} {'B':>3} {'H':>3} {'causal':<6} "
           f"{'backend':<9} {'ours':>7} {'cuDNN':>7} {'FA2':>7} {'/cuDNN':>7} {'/FA2':>6}  status")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['label']:<6} {r['dtype']:<5} {head_dims(r):>{dw}} {r['S']:>6} {r['B']:>3} "
              f"{r['H']:>3} {'yes' if r['causal'] else 'no':<6} {r.get('resolved', '-'):<9} "
              f"{tflops_cell(r, 'ours'):>7} {tflops_cell(r, 'cudnn'):>7} "
              f"{tflops_cell(r, 'fa2'):>7} "
              f"{fmt(r['ours_over_cudnn'], '.2f'):>7} {fmt(r['ours_over_fa2'], '.2f'):>6}  "
              f"{r['status']}" + (f" ({r['error']})" if r.get("error") else "")
              + (f" err {r['check']['out_err']:.2e} > {r['check']['out_bound']:.2e} / lse "
                 f"{r['check']['lse_err']:.2e} > {r['check']['lse_bound']:.2e}"
                 if r["status"] == "FAIL" else "")
              + ("".join(f" / {n} {r['grad_check']['grad_err'][n]:.2e} > "
                         f"{r['grad_check']['grad_bound'][n]:.2e}"
                         for n in ("dq", "dk", "dv"))
                 if r["status"] == "FAIL" and "grad_check" in r else ""))
    direction = rows[0].get("direction", "fwd") if rows else "fwd"
    print(f"({DIRECTION_NAMES[direction]} TFLOPS; ratios are ours / theirs; do_bench medians)")
    for line in na_notes(rows):
        print(line)


def na_notes(rows):
    """One line per (implementation, error) behind the table's n/a cells, with the points."""
    seen = {}
    for r in rows:
        for name in ("cudnn", "fa2"):
            if r.get(f"{name}_error"):
                seen.setdefault((name, r[f"{name}_error"]), []).append(
                    f"{head_dims(r)}/{r['S']}/{'c' if r['causal'] else 'nc'}")
    return [f"n/a {IMPL_NAMES[name]} at {len(pts)} point(s) ({', '.join(pts[:4])}"
            f"{', ...' if len(pts) > 4 else ''}): {err}" for (name, err), pts in seen.items()]


IMPL_NAMES = {"ours": "ours", "cudnn": "cuDNN", "fa2": "FA2"}
DIRECTION_NAMES = {"fwd": "forward", "bwd": "backward", "fwdbwd": "forward+backward"}
FLOPS_DOC = {
    "fwd": "4*B*H*Sq*Sk*D, halved for causal with Sq == Sk",
    "bwd": "2.5 * 4*B*H*Sq*Sk*D, halved for causal with Sq == Sk",
    "fwdbwd": "3.5 * 4*B*H*Sq*Sk*D, halved for causal with Sq == Sk",
}
# With --dv (v's head dim Dv): QK^T over D and PV over Dv.
FLOPS_DOC_DV = {
    "fwd": "2*B*H*Sq*Sk*(D + Dv), halved for causal with Sq == Sk",
    "bwd": "2.5 * 2*B*H*Sq*Sk*(D + Dv), halved for causal with Sq == Sk",
    "fwdbwd": "3.5 * 2*B*H*Sq*Sk*(D + Dv), halved for causal with Sq == Sk",
}


def plot(rows, env, path, backend, direction="fwd"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {}
    for r in rows:
        key = (r["label"], r["dtype"], r["D"], r["causal"], r.get("Dv", r["D"]))
        groups.setdefault(key, []).append(r)
    keys = sorted(groups, key=lambda k: (k[0] != "grid", k[2], k[4], k[3]))
    ncol = 2
    nrow = max(1, math.ceil(len(keys) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.5 * ncol, 3.3 * nrow), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        rs = sorted(groups[key], key=lambda r: r["S"])
        xs = range(len(rs))
        w = 0.27
        for i, (name, col) in enumerate((("ours", "#d62728"), ("cudnn", "#1f77b4"),
                                         ("fa2", "#7f7f7f"))):
            vals = [r[f"{name}_tflops"] or 0.0 for r in rs]
            bars = ax.bar([x + (i - 1) * w for x in xs], vals, w,
                          label={"ours": f"flashattn ({backend})", "cudnn": "cuDNN",
                                 "fa2": "FA2 (SDPA)"}[name], color=col)
            for bar, val in zip(bars, vals):
                if val:
                    ax.annotate(f"{val:.0f}", (bar.get_x() + bar.get_width() / 2, val),
                                ha="center", va="bottom", fontsize=6)
        for x, r in zip(xs, rs):
            if r["status"] != "ok":
                ax.annotate(r["status"], (x, 0), ha="center", va="bottom", fontsize=7,
                            color="red")
            for i, name in ((0, "cudnn"), (1, "fa2")):
                if r.get(f"{name}_error"):  # refused: n/a under its (empty) bar
                    ax.annotate("n/a", (x + i * w, 0), ha="center", va="bottom", fontsize=6,
                                color="#555555")
        label, dtype, d, causal, dv = key
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{r['S'] // 1024}k" if r["S"] >= 1024 else str(r["S"]) for r in rs])
        ax.set_title(f"{label}: {dtype} D={d}{f' Dv={dv}' if dv != d else ''} "
                     f"{'causal' if causal else 'non-causal'}"
                     + (f" B={rs[0]['B']} H={rs[0]['H']}" if label == "seed" else ""),
                     fontsize=9)
        ax.set_xlabel("seqlen")
        ax.set_ylabel("TFLOPS")
        top = max([r[f"{n}_tflops"] or 0.0 for r in rs for n in ("ours", "cudnn", "fa2")] + [1.0])
        ax.set_ylim(0, top * 1.3)  # room for the legend above the bars
        ax.legend(fontsize=7, loc="upper left", ncol=3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(f"{DIRECTION_NAMES[direction]} TFLOPS on {env['device']} (driver {env['driver']}, torch "
                 f"{env['torch']}, cuDNN {env['cudnn']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ints(s):
    return [int(x) for x in s.split(",") if x]


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="auto", choices=["auto", "sm90", "sm80", "reference"])
    ap.add_argument("--dims", type=ints, default=[64, 128, 256])
    ap.add_argument("--dv", type=int, default=None,
                    help="v's (and out's) head dim for every D of --dims (default: D); q and k "
                         "keep D and H stays hidden / D")
    ap.add_argument("--seqlens", type=ints, default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--causal", default="both", choices=["both", "yes", "no"])
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--tokens", type=int, default=16384, help="batch * seqlen")
    ap.add_argument("--hidden", type=int, default=2048, help="H * D")
    ap.add_argument("--no-seed", action="store_true", help="leave out the seed shape")
    ap.add_argument("--quick", action="store_true",
                    help="a few points: D=128, seqlen 1k and 4k, causal and not, plus the seed")
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warmup (ms)")
    ap.add_argument("--rep", type=int, default=100, help="do_bench repetitions (ms)")
    ap.add_argument("--timer", default="eager", choices=["eager", "graph"],
                    help="eager: time the Python call; graph: time a CUDA-graph replay of it "
                         "(kernel time without host overhead), for all implementations alike")
    ap.add_argument("--impls", type=lambda s: s.split(","), default=["ours", "cudnn", "fa2"],
                    help="which to run, comma-separated subset of ours,cudnn,fa2 (without ours "
                         "nothing of ours is checked or timed)")
    ap.add_argument("--check-sdpa", action="store_true",
                    help="also report cuDNN's and FA2's max error vs the fp32 reference")
    ap.add_argument("--direction", default="fwd", choices=list(bwd.DIRECTIONS),
                    help="fwd: the forward; bwd: the backward alone (forward run once, "
                         "untimed); fwdbwd: both in one call")
    ap.add_argument("--deterministic", action="store_true",
                    help="our backward with deterministic=True (bitwise reproducible)")
    ap.add_argument("--out", default=str(REPO / "docs" / "perf"), help="output folder")
    ap.add_argument("--name", default=None,
                    help="file stem (default compare-<backend>[-<direction>][-graph][-quick]"
                         "[-d<D>v<Dv>]; no direction part for fwd, no -d..v.. part without a "
                         "--dv that differs from a D)")
    return ap


def parse_args(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.impls or set(args.impls) - {"ours", "cudnn", "fa2"}:
        ap.error("--impls: a comma-separated subset of ours,cudnn,fa2")
    if args.dv is not None and args.dv <= 0:
        ap.error("--dv: a positive head dim")
    if args.quick:
        args.dims, args.seqlens = [128], [1024, 4096]
    return args


def dv_differs(args):
    return args.dv is not None and any(d != args.dv for d in args.dims)


def output_stem(args):
    """File stem of the JSON and PNG: the forward's names are unchanged by --direction, and
    every name without a --dv differing from a D by --dv (-d192v128, -d128-192v128)."""
    return args.name or (f"compare-{args.backend}"
                         + (f"-{args.direction}" if args.direction != "fwd" else "")
                         + ("-graph" if args.timer == "graph" else "")
                         + ("-quick" if args.quick else "")
                         + (f"-d{'-'.join(map(str, args.dims))}v{args.dv}"
                            if dv_differs(args) else ""))


def main(argv=None):
    args = parse_args(argv)

    if not torch.cuda.is_available():
        print("compare.py: no CUDA device", file=sys.stderr)
        return 2
    env = environment()
    print(f"device   {env['device']} (sm_{env['capability'].replace('.', '')}, "
          f"{env['sms']} SMs)  driver {env['driver']}  clocks {env['clocks'] or 'n/a'}")
    print(f"torch    {env['torch']} (CUDA {env['torch_cuda']})  cuDNN {env['cudnn']}  "
          f"triton {env['triton']}")
    print(f"flashattn {env['flashattn']} lib {env['libflashattn']} ({env['libflashattn_path']})"
          f"  backend {args.backend}  direction {args.direction}"
          + ("  deterministic" if args.deterministic else ""))
    print()

    rows = []
    for pt in grid(args):
        r = run_point(pt, args)
        rows.append(r)
        dv = f" Dv={r['Dv']}" if r.get("Dv", r["D"]) != r["D"] else ""
        print(f"  {r['label']} {r['dtype']} D={r['D']}{dv} S={r['S']} causal={int(r['causal'])}: "
              f"{r['status']} ours {tflops_cell(r, 'ours')} cuDNN {tflops_cell(r, 'cudnn')} "
              f"FA2 {tflops_cell(r, 'fa2')}", flush=True)
    print()
    print_table(rows)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = output_stem(args)
    settings = {k: v for k, v in vars(args).items()
                if k not in ("out", "name") and not (k == "dv" and v is None)}
    (out / f"{stem}.json").write_text(json.dumps(
        {"env": env, "settings": settings, "direction": args.direction,
         "flops": (FLOPS_DOC_DV if args.dv is not None else FLOPS_DOC)[args.direction],
         "timer": f"triton.testing.do_bench median (ms), {args.timer} calls"
                  + ("" if args.direction != "bwd" else
                     "; backward alone: autograd.grad after one untimed forward"),
         "rows": rows},
        indent=1))
    try:
        plot(rows, env, out / f"{stem}.png", args.backend, args.direction)
    except ImportError as e:
        print(f"no plot: {e}")
    print(f"\nwrote {out / (stem + '.json')} and {out / (stem + '.png')}")
    return 1 if any(r["status"] not in ("ok", "skipped") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
