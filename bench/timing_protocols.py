#!/usr/bin/env python3
"""Same kernels, different timing protocols (GPU machine): separates cache effects from clock and
power effects when two harnesses disagree about a ratio.

  back-to-back  20 calls in a row, CUDA events around each (hot L2, sustained load)
  flush         a 256 MB memset before each call, events around the call only (cold L2, like
                triton's do_bench and ncu's cache control)
  idle          synchronize and sleep 5 ms on the host before each call (GPU idle between calls)

    FLASHATTN_LIBRARY=... python3 bench/timing_protocols.py [D:causal:S ...]   (bf16, 16k tokens)
"""
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import flashattn  # noqa: E402


def timed(fn, protocol, iters=20):
    scratch = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        if protocol == "flush":
            scratch.zero_()
        elif protocol == "idle":
            torch.cuda.synchronize()
            time.sleep(0.005)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        if protocol != "back-to-back":
            torch.cuda.synchronize()
        ts.append((e0, e1))
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ts)
    return ms[len(ms) // 2]


def main(specs):
    for spec in specs or ["128:0:2048", "128:1:2048", "128:0:8192"]:
        d, c, s = (int(x) for x in spec.split(":"))
        b, h, causal = 16384 // s, 2048 // d, bool(c)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) + 0.3 for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)

        def ours():
            flashattn.flash_attn_func(q, k, v, causal=causal)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        for protocol in ("back-to-back", "flush", "idle"):
            t_o, t_c = timed(ours, protocol), timed(cudnn, protocol)
            print(f"D={d} causal={c} S={s} {protocol:13s} ours {flops / t_o / 1e9:6.1f}  cuDNN {flops / t_c / 1e9:6.1f}"
                  f"  ratio {t_c / t_o:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
