#!/usr/bin/env python3
"""Summarises `flashattn-sm80-tune --bwd` output: for each (mode, D, mask, S) the time of every
candidate relative to that group's first one, the shipped tile without loop options
(bwd_candidates.cu lists it first): its time / the candidate's, so > 1 is faster.
With --top N: per (mode, D, mask) instead, the N candidates whose slowest S is fastest, with
their ratio at every S (how the shipped kernels are picked: fastest at every S).

  flashattn-sm80-tune --bwd --dims 64,128 > tune.csv && python3 tools/tune/bwd_rel.py tune.csv [--top 4]
"""
import argparse
import collections


def read(path):
    """{(mode, d, mask): {candidate: {seq: ms}}}, candidates in file order."""
    groups = collections.OrderedDict()
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) < 8 or fields[0] not in ("bwd", "bwd-det") or fields[6] == "ms":
                continue
            mode, d, mask, seq, name, ms = fields[0], int(fields[1]), fields[2], int(fields[3]), fields[4], float(fields[6])
            short = name.removeprefix(f"bwd_d{d}_").removesuffix("_bf16")
            groups.setdefault((mode, d, mask), collections.OrderedDict()).setdefault(short, {})[seq] = ms
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tuner_output")
    ap.add_argument("--top", type=int, default=0, help="rank candidates per (mode, D, mask)")
    args = ap.parse_args()
    for (mode, d, mask), cands in read(args.tuner_output).items():
        base_name, base = next(iter(cands.items()))
        seqs = sorted(base)
        rel = {n: [base[s] / t[s] for s in seqs if s in t] for n, t in cands.items()}
        if args.top:
            ranked = sorted((n for n in cands if n != base_name and len(rel[n]) == len(seqs)), key=lambda n: -min(rel[n]))
            for n in ranked[: args.top]:
                print(f"{mode} d{d} {mask} {n} " + " / ".join(f"{r:.3f}" for r in rel[n]))
            continue
        for i, s in enumerate(seqs):
            line = " ".join(f"{n}:{rel[n][i]:.3f}" for n in cands if n != base_name and len(rel[n]) == len(seqs))
            print(f"{mode} d{d} {mask} S={s} {base_name} {base[s]:.3f} ms | {line}")


if __name__ == "__main__":
    main()
