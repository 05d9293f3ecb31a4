"""Ring attention scaling: tokens/s of ring_flash_attn_func on W GPUs vs flash_attn_func on one.

    torchrun --standalone --nproc_per_node=8 bench/ring_scaling.py
    torchrun --standalone --nproc_per_node=4 bench/ring_scaling.py --seqlens 131072,262144 \
        --causal true --json ring.jsonl
    torchrun --standalone --nproc_per_node=8 bench/ring_scaling.py --direction both \
        --table docs/perf/ring_scaling_w8.md

For each sequence length (default 128k, 256k, 512k, 1M tokens), causal mode and direction,
every rank holds its shard (zigzag for causal, contiguous otherwise) and the ring is timed
with CUDA events (the slowest rank counts); rank 0 then times flash_attn_func on the whole
sequence on its GPU alone (skip with --no-baseline) while the others wait. --direction fwd
(the default) times the forward alone (under torch.no_grad(): nothing saved), fwdbwd one
forward plus its backward (torch.autograd.grad of out, inputs requiring grad), both does each.
Reported: ms per call, tokens/s, TFLOP/s per GPU (the backward counted as 2.5 forwards),
speedup vs 1 GPU and parallel efficiency (speedup / W); --json appends one line per result,
--table writes them as a markdown table (e.g. under docs/perf/), both on rank 0.

Before timing, --check (on by default) verifies the NCCL path on a small sequence: the
gathered ring output against flash_attn_func on the full sequence (max abs error printed and
held to the library's rule against an fp32 reference), and with fwdbwd/both the gathered
dq, dk, dv likewise (the backward rule, flash_attn_func's own gradient error as yardstick).

NCCL environment variables (NCCL_NVLS_ENABLE and other multicast settings included) are left as
the machine sets them; the ones present are printed for the record.

The library is found as usual (FLASHATTN_LIBRARY=/path/to/libflashattn.so, or the in-tree
build). Status: run with one rank only (torchrun --nproc_per_node=1 on an H200, both
directions, the check included); not yet run on several GPUs.
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
    p.add_argument("--direction", choices=["fwd", "fwdbwd", "both"], default="fwd",
                   help="time the forward, forward+backward, or each")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--baseline-iters", type=int, default=2,
                   help="timed flash_attn_func runs on one GPU (they are long at 1M tokens)")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--json", default=None, help="append one JSON line per result (rank 0)")
    p.add_argument("--table", default=None,
                   help="write the results as a markdown table to this file (rank 0), e.g. "
                        "docs/perf/ring_scaling_w8.md")
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


def fp32_reference(q, k, v, causal, heads, hkv):
    """Naive fp32 attention over the full sequence (S <= 4096 for 8 GPUs: the score matrix
    fits easily); differentiable."""
    S, D = q.size(1), q.size(3)
    qh = q.float().transpose(1, 2)
    kh = k.float().transpose(1, 2).repeat_interleave(heads // hkv, dim=1)
    vh = v.float().transpose(1, 2).repeat_interleave(heads // hkv, dim=1)
    s = torch.matmul(qh, kh.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1),
                          float("-inf"))
    return torch.matmul(torch.softmax(s, -1), vh).transpose(1, 2)


def gather(t, world):
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return parts


def check(args, causal, world, rank, backward=False):
    """Small end-to-end check of the NCCL ring against flash_attn_func on the full sequence
    (with backward=True, of the gradients too)."""
    dtype = DTYPES[args.dtype]
    S = 2 * world * 256  # divisible by 2*world: equal shards in both modes, all_gather-able
    hkv = args.kv_heads or args.heads
    g = torch.Generator(device="cuda").manual_seed(1234)  # same full tensors on every rank

    def rnd(h):
        return (torch.randn(args.batch, S, h, args.headdim, device="cuda", generator=g)
                + 0.3).to(dtype)

    q, k, v = rnd(args.heads), rnd(hkv), rnd(hkv)
    dout = torch.randn(args.batch, S, args.heads, args.headdim, device="cuda", generator=g,
                       dtype=torch.float32).to(dtype)
    shard, unshard = shard_fns(causal)
    local = [shard(t, world, rank).detach().requires_grad_(backward) for t in (q, k, v)]
    with torch.set_grad_enabled(backward):
        out_l, lse_l = ring_flash_attn_func(*local, causal=causal, return_lse=True)
    if backward:
        out_l.backward(shard(dout, world, rank))
    outs, lses = gather(out_l.detach(), world), gather(lse_l.detach(), world)
    grads = [gather(t.grad, world) for t in local] if backward else None
    if rank == 0:
        out, lse = unshard(outs, dim=1), unshard(lses, dim=2)
        full_in = [t.detach().requires_grad_(backward) for t in (q, k, v)]
        with torch.set_grad_enabled(backward):
            full, full_lse = flash_attn_func(*full_in, causal=causal, return_lse=True)
            ref_in = [t.detach().requires_grad_(backward) for t in (q, k, v)]
            ref = fp32_reference(*ref_in, causal, args.heads, hkv)
        err = (out.float() - ref).abs().max().item()
        ferr = (full.float() - ref).abs().max().item()
        derr = (out.float() - full.float()).abs().max().item()
        lerr = (lse - full_lse).abs().max().item()
        # the library's own error vs fp32 stands in for the low-precision yardstick here
        ok = err <= 2 * ferr + (2e-4 if dtype == torch.float16 else 1e-3)
        print(f"check causal={causal} S={S}: |ring-ref| {err:.3g}, |flash-ref| {ferr:.3g}, "
              f"|ring-flash| {derr:.3g}, |lse ring-flash| {lerr:.3g}: "
              f"{'OK' if ok else 'MISMATCH'}", flush=True)
        if backward:
            fgrads = torch.autograd.grad(full, full_in, dout)
            rgrads = torch.autograd.grad(ref, ref_in, dout.float())
            atol = 1e-3 if dtype == torch.float16 else 8e-3  # tests' GRAD_ATOL
            for name, parts, fg, rg in zip(("dq", "dk", "dv"), grads, fgrads, rgrads):
                ours = unshard(parts, dim=1)
                e = (ours.float() - rg).abs().max().item()
                fe = (fg.float() - rg).abs().max().item()
                print(f"check causal={causal} S={S} {name}: |ring-ref| {e:.3g}, |flash-ref| "
                      f"{fe:.3g}: {'OK' if e <= 2 * fe + atol else 'MISMATCH'}", flush=True)
        del ref
    dist.barrier()


def baseline_ms(args, S, hkv, causal, backward):
    """flash_attn_func on the whole sequence on this GPU alone, ms per call."""
    dtype = DTYPES[args.dtype]
    qf = torch.randn(args.batch, S, args.heads, args.headdim, device="cuda", dtype=dtype)
    kf = torch.randn(args.batch, S, hkv, args.headdim, device="cuda", dtype=dtype)
    vf = torch.randn_like(kf)
    if backward:
        for t in (qf, kf, vf):
            t.requires_grad_()
        dout = torch.randn_like(qf)

        def fn():  # autograd.grad: nothing accumulates into .grad between calls
            torch.autograd.grad(flash_attn_func(qf, kf, vf, causal=causal), (qf, kf, vf), dout)
    else:
        def fn():
            with torch.no_grad():
                flash_attn_func(qf, kf, vf, causal=causal)
    fn()
    torch.cuda.synchronize()
    st, en = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    st.record()
    for _ in range(args.baseline_iters):
        fn()
    en.record()
    torch.cuda.synchronize()
    return st.elapsed_time(en) / max(args.baseline_iters, 1)


def write_table(path, args, world, results):
    hkv = args.kv_heads or args.heads
    lines = [
        f"# Ring attention scaling ({world} GPUs)",
        "",
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}; B {args.batch}, "
        f"H {args.heads}/{hkv}, D {args.headdim}, {args.dtype}; bench/ring_scaling.py "
        f"(warmup {args.warmup}, iters {args.iters}, 1-GPU iters {args.baseline_iters}). "
        f"fwdbwd = one forward + its backward; TFLOP/s per GPU counts the backward as 2.5 "
        f"forwards.",
        "",
        "| W | seqlen | causal | direction | ring ms | tokens/s | TFLOP/s/GPU | 1-GPU ms "
        "| speedup | efficiency |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        def get(key):
            return "-" if r.get(key) is None else r[key]
        lines.append(f"| {r['world']} | {r['seqlen']} | {r['causal']} | {r['direction']} | "
                     f"{r['ring_ms']} | {r['ring_tokens_per_s']} | {r['ring_tflops_per_gpu']} | "
                     f"{get('one_gpu_ms')} | {get('speedup')} | {get('efficiency')} |")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"table written to {path}", flush=True)


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[args.dtype]
    hkv = args.kv_heads or args.heads
    modes = {"true": [True], "false": [False], "both": [False, True]}[args.causal]
    directions = {"fwd": ["fwd"], "fwdbwd": ["fwdbwd"], "both": ["fwd", "fwdbwd"]}[
        args.direction]
    log(f"ring_scaling: world {world}, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"B {args.batch} H {args.heads}/{hkv} D {args.headdim} {args.dtype}")
    log("NCCL env: " + (", ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                                  if k.startswith("NCCL_")) or "(none set)"))
    if not args.no_check:
        for causal in modes:
            check(args, causal, world, rank, backward="fwdbwd" in directions)

    results = []
    for S in (int(x) for x in args.seqlens.split(",")):
        for causal in modes:
            if causal and S % (2 * world):
                log(f"skip S={S} causal: not divisible by 2*world={2 * world}")
                continue
            for direction in directions:
                backward = direction == "fwdbwd"
                n_local = S // world if causal else ring_shard_lengths(S, world)[rank]
                torch.manual_seed(rank)
                q = torch.randn(args.batch, n_local, args.heads, args.headdim, device="cuda",
                                dtype=dtype)
                k = torch.randn(args.batch, n_local, hkv, args.headdim, device="cuda",
                                dtype=dtype)
                v = torch.randn_like(k)
                if backward:
                    for t in (q, k, v):
                        t.requires_grad_()
                    dout = torch.randn_like(q)

                    def step():
                        torch.autograd.grad(ring_flash_attn_func(q, k, v, causal=causal),
                                            (q, k, v), dout)
                else:
                    def step():
                        with torch.no_grad():
                            ring_flash_attn_func(q, k, v, causal=causal)
                ring_ms = time_cuda(step, args.warmup, args.iters)
                del q, k, v, step
                if backward:
                    del dout
                torch.cuda.empty_cache()
                base_ms = None
                if not args.no_baseline:
                    if rank == 0:
                        base_ms = baseline_ms(args, S, hkv, causal, backward)
                        torch.cuda.empty_cache()
                    dist.barrier()
                tokens = args.batch * S
                flops = 4 * args.batch * S * S * args.heads * args.headdim * (
                    0.5 if causal else 1) * (3.5 if backward else 1)
                r = {"world": world, "seqlen": S, "causal": causal, "direction": direction,
                     "batch": args.batch, "heads": args.heads, "kv_heads": hkv,
                     "headdim": args.headdim, "dtype": args.dtype,
                     "ring_ms": round(ring_ms, 3),
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
    if rank == 0 and args.table:
        write_table(args.table, args, world, results)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
