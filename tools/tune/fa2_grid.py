# FA2 (PyTorch SDPA, FLASH_ATTENTION backend) on the standard grid, same CSV columns and the same
# back-to-back CUDA-event medians as `flashattn-sm80-tune --grid`; run in the same session for side-by-side
# numbers while tuning the sm80 family. The yardstick for reported numbers is bench/compare.py.
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, warmup=5, iters=20):
    for _ in range(warmup):
        fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    ev[0].record()
    for i in range(iters):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    t = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(iters))
    return t[iters // 2]


print(f"fa2 device: {torch.cuda.get_device_name()} torch {torch.__version__}")
print("fa2,dtype,d,causal,seqlen,batch,heads,ms,tflops")
for dt_name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
    for d in (64, 128, 256):
        for causal in (False, True):
            for s in (512, 1024, 2048, 4096, 8192, 16384):
                b, h = 16384 // s, 2048 // d
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dt) for _ in range(3))
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                fl = 4 * b * h * s * s * d / (2 if causal else 1)
                print(f"fa2,{dt_name},{d},{'causal' if causal else 'full'},{s},{b},{h},{ms:.4f},{fl / ms / 1e9:.1f}")
