#!/usr/bin/env python3
"""Summarises `flashattn-sm80-tune --bwd` output: for each (mode, D, mask, S) the time of every
candidate relative to that group's first one, the shipped tile without loop options
(bwd_candidates.cu lists it first): its time / the candidate's, so > 1 is faster.

  flashattn-sm80-tune --bwd --dims 64,128 > tune.csv && python3 tools/tune/bwd_rel.py tune.csv
"""
import collections
import sys


def main(path):
    groups = collections.OrderedDict()
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) < 8 or fields[0] not in ("bwd", "bwd-det") or fields[6] == "ms":
                continue
            mode, d, mask, seq, name, ms = fields[0], fields[1], fields[2], fields[3], fields[4], float(fields[6])
            short = name.removeprefix(f"bwd_d{d}_").removesuffix("_bf16")
            groups.setdefault((mode, int(d), mask, int(seq)), []).append((short, ms))
    for (mode, d, mask, seq), rows in groups.items():
        base_name, base_ms = rows[0]
        rel = " ".join(f"{n}:{base_ms / ms:.3f}" for n, ms in rows[1:])
        print(f"{mode} d{d} {mask} S={seq} {base_name} {base_ms:.3f} ms | {rel}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bwd_rel.py TUNER_OUTPUT")
    main(sys.argv[1])
