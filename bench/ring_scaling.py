"""Ring attention scaling: tokens/s of ring_flash_attn_func on W GPUs vs flash_attn_func on one.

    torchrun --standalone --nproc_per_node=8 bench/ring_scaling.py
    torchrun --standalone --nproc_per_node=4 bench/ring_scaling.py --seqlens 131072,262144 \
        --causal true --json ring.jsonl

For each sequence length (default 128k, 256k, 512k, 1M tokens) and causal mode, every rank
holds its shard (zigzag for causal, contiguous otherwise) and the ring forward is timed with
CUDA events (the slowest rank counts); rank 0 then times flash_attn_func on the whole sequence
on its GPU alone (skip with --no-baseline) while the others wait. Reported: ms per forward,
tokens/s, speedup vs 1 GPU and parallel efficiency (speedup / W).

Before timing, --check (on by default) verifies the NCCL path on a small sequence: the
gathered ring output against flash_attn_func on the full sequence (max abs error printed and
held to the library's rule against an fp32 reference).

NCCL environment variables (NCCL_NVLS_ENABLE and other multicast settings included) are left as
the machine sets them; the ones present are printed for the record.

The library is found as usual (FLASHATTN_LIBRARY=/path/to/libflashattn.so, or the in-tree
build). Status: written without a multi-GPU machine; not yet run.
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from flashattn import flash_attn_func  # noqa: E402
from flashattn.distributed import (  # noqa: E402
    ring_flash_attn_func, ring_shard, ring_shard_lengths, ring_unshard, zigzag_shard,
    zigzag_unshard)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seqlens", default="131072,262144,524288,1048576",
                   help="comma-separated total sequence lengths (tokens per sequence)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=None, help="default: --heads (no GQA)")
    p.add_argument("--headdim", type=int, default=128)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--causal", choices=["true", "false", "both"], default="both")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--baseline-iters", type=int, default=2,
                   help="timed flash_attn_func runs on one GPU (they are long at 1M tokens)")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--json", default=None, help="append one JSON line per result (rank 0)")
    return p.parse_args()


def log(*a):
    if dist.get_rank() == 0:
        print(*a, flush=True)


def time_cuda(fn, warmup, iters):
    """Mean ms per call on this rank's stream, then the max over ranks."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    ms = torch.tensor([start.elapsed_time(end) / max(iters, 1)], device="cuda")
    dist.all_reduce(ms, op=dist.ReduceOp.MAX)
    return ms.item()


def shard_fns(causal):
    return (zigzag_shard, zigzag_unshard) if causal else (ring_shard, ring_unshard)


def check(args, causal, world, rank):
    """Small end-to-end check of the NCCL ring against flash_attn_func on the full sequence."""
    dtype = DTYPES[args.dtype]
    S = 2 * world * 256  # divisible by 2*world: equal shards in both modes, all_gather-able
    hkv = args.kv_heads or args.heads
    g = torch.Generator(device="cuda").manual_seed(1234)  # same full tensors on every rank

    def rnd(h):
        return (torch.randn(args.batch, S, h, args.headdim, device="cuda", generator=g)
                + 0.3).to(dtype)

    q, k, v = rnd(args.heads), rnd(hkv), rnd(hkv)
    shard, unshard = shard_fns(causal)
    out_l, lse_l = ring_flash_attn_func(*(shard(t, world, rank) for t in (q, k, v)),
                                        causal=causal, return_lse=True)
    outs = [torch.empty_like(out_l) for _ in range(world)]
    lses = [torch.empty_like(lse_l) for _ in range(world)]
    dist.all_gather(outs, out_l.contiguous())
    dist.all_gather(lses, lse_l.contiguous())
    if rank == 0:
        out, lse = unshard(outs, dim=1), unshard(lses, dim=2)
        full, full_lse = flash_attn_func(q, k, v, causal=causal, return_lse=True)
        # fp32 reference (S <= 4096 for 8 GPUs: the score matrix fits easily)
        qh = q.float().transpose(1, 2)
        kh = k.float().transpose(1, 2).repeat_interleave(args.heads // hkv, dim=1)
        vh = v.float().transpose(1, 2).repeat_interleave(args.heads // hkv, dim=1)
        s = torch.matmul(qh, kh.transpose(-1, -2)) / math.sqrt(args.headdim)
        if causal:
            s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device="cuda").triu(1),
                              float("-inf"))
        ref = torch.matmul(torch.softmax(s, -1), vh).transpose(1, 2)
        err = (out.float() - ref).abs().max().item()
        ferr = (full.float() - ref).abs().max().item()
        derr = (out.float() - full.float()).abs().max().item()
        lerr = (lse - full_lse).abs().max().item()
        # the library's own error vs fp32 stands in for the low-precision yardstick here
        ok = err <= 2 * ferr + (2e-4 if dtype == torch.float16 else 1e-3)
        print(f"check causal={causal} S={S}: |ring-ref| {err:.3g}, |flash-ref| {ferr:.3g}, "
              f"|ring-flash| {derr:.3g}, |lse ring-flash| {lerr:.3g}: "
              f"{'OK' if ok else 'MISMATCH'}", flush=True)
        del s
    dist.barrier()


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[args.dtype]
    hkv = args.kv_heads or args.heads
    modes = {"true": [True], "false": [False], "both": [False, True]}[args.causal]
    log(f"ring_scaling: world {world}, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"B {args.batch} H {args.heads}/{hkv} D {args.headdim} {args.dtype}")
    log("NCCL env: " + (", ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                                  if k.startswith("NCCL_")) or "(none set)"))
    if not args.no_check:
        for causal in modes:
            check(args, causal, world, rank)

    results = []
    for S in (int(x) for x in args.seqlens.split(",")):
        for causal in modes:
            if causal and S % (2 * world):
                log(f"skip S={S} causal: not divisible by 2*world={2 * world}")
                continue
            n_local = S // world if causal else ring_shard_lengths(S, world)[rank]
            torch.manual_seed(rank)
            q = torch.randn(args.batch, n_local, args.heads, args.headdim, device="cuda",
                            dtype=dtype)
            k = torch.randn(args.batch, n_local, hkv, args.headdim, device="cuda", dtype=dtype)
            v = torch.randn_like(k)
            ring_ms = time_cuda(lambda: ring_flash_attn_func(q, k, v, causal=causal),
                                args.warmup, args.iters)
            del q, k, v
            torch.cuda.empty_cache()
            base_ms = None
            if not args.no_baseline:
                if rank == 0:
                    qf = torch.randn(args.batch, S, args.heads, args.headdim, device="cuda",
                                     dtype=dtype)
                    kf = torch.randn(args.batch, S, hkv, args.headdim, device="cuda",
                                     dtype=dtype)
                    vf = torch.randn_like(kf)
                    flash_attn_func(qf, kf, vf, causal=causal)
                    torch.cuda.synchronize()
                    st, en = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                    st.record()
                    for _ in range(args.baseline_iters):
                        flash_attn_func(qf, kf, vf, causal=causal)
                    en.record()
                    torch.cuda.synchronize()
                    base_ms = st.elapsed_time(en) / max(args.baseline_iters, 1)
                    del qf, kf, vf
                    torch.cuda.empty_cache()
                dist.barrier()
            tokens = args.batch * S
            flops = 4 * args.batch * S * S * args.heads * args.headdim * (0.5 if causal else 1)
            r = {"world": world, "seqlen": S, "causal": causal, "batch": args.batch,
                 "heads": args.heads, "kv_heads": hkv, "headdim": args.headdim,
                 "dtype": args.dtype, "ring_ms": round(ring_ms, 3),
                 "ring_tokens_per_s": round(tokens / ring_ms * 1e3),
                 "ring_tflops_per_gpu": round(flops / (ring_ms * 1e-3) / world / 1e12, 1)}
            if base_ms is not None:
                r.update({"one_gpu_ms": round(base_ms, 3),
                          "one_gpu_tokens_per_s": round(tokens / base_ms * 1e3),
                          "speedup": round(base_ms / ring_ms, 3),
                          "efficiency": round(base_ms / ring_ms / world, 3)})
            log(json.dumps(r))
            results.append(r)
    if rank == 0 and args.json:
        with open(args.json, "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
