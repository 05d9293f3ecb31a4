# cuDNN (PyTorch SDPA) timing on the standard grid, same protocol as test_sm90_standalone bench:
# 5 warm-up, median of 20 CUDA-event timings. Usage:
#   python3 bench_cudnn_sm90.py D causal bf16 [S...]
#   python3 bench_cudnn_sm90.py D:causal:bf16:S,S,... [more specs]   (one process, one torch import)
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


def run(d, causal, bf16, seqs):
    dt = torch.bfloat16 if bf16 else torch.float16
    for s in seqs:
        b, h = 16384 // s, 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dt).transpose(1, 2) for _ in range(3))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(5):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ts = []
            for _ in range(20):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1))
        ms = sorted(ts)[len(ts) // 2]
        fl = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        print(f"cudnn d={d} causal={int(causal)} {'bf16' if bf16 else 'fp16'} B={b} H={h} S={s} : {fl / ms / 1e9:.1f} TFLOPS",
              flush=True)


if ":" in sys.argv[1]:
    for spec in sys.argv[1:]:
        d, c, bf, ss = spec.split(":")
        run(int(d), bool(int(c)), bool(int(bf)), [int(x) for x in ss.split(",")])
else:
    run(int(sys.argv[1]), bool(int(sys.argv[2])), bool(int(sys.argv[3])),
        [int(x) for x in sys.argv[4:]] or [512, 1024, 2048, 4096, 8192, 16384])
