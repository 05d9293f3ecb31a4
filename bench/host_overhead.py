#!/usr/bin/env python3
"""Host time per call (GPU machine): flash_attn_func, the bare C ABI call through ctypes, and
SDPA's cuDNN backend, on a problem so small that the host is the bottleneck; then a cProfile
of flash_attn_func. Under triton's do_bench (a 256 MB memset before each call) host time
beyond the memset's ~80 us shows up as kernel time, so it must stay well below that.

    FLASHATTN_LIBRARY=... python3 bench/host_overhead.py
"""
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import flashattn  # noqa: E402
from flashattn import _lib, _torch  # noqa: E402


def per_call_us(fn, n=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    q, k, v = (torch.randn(1, 128, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    lse = torch.empty(1, 2, 128, device="cuda", dtype=torch.float32)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    descs = [_torch._prepared(t)[1] for t in (q, k, v, out)]
    stream = torch.cuda.current_stream().cuda_stream

    def sdpa():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(qt, kt, vt)

    rows = [("flash_attn_func", lambda: flashattn.flash_attn_func(q, k, v)),
            ("ctypes flashattn_forward", lambda: _lib.forward(*descs, lse.data_ptr(), 0.0, False, "auto", stream)),
            ("ctypes flashattn_forward sm90", lambda: _lib.forward(*descs, lse.data_ptr(), 0.0, False, "sm90", stream)),
            ("SDPA cuDNN", sdpa)]
    for name, fn in rows:
        print(f"host per call  {name:32s} {per_call_us(fn):7.1f} us", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(500):
        flashattn.flash_attn_func(q, k, v)
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
    print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[:3000])


if __name__ == "__main__":
    main()
