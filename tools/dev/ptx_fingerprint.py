#!/usr/bin/env python3
"""Fingerprints the kernels of PTX files so a refactor can show its kernels unchanged.

Each .entry/.func body is normalised (debug directives, comments and blank lines dropped;
mangled names, virtual registers and labels renamed by their order of first appearance inside
the body, so renamed types or namespaces, or a register numbering shifted by one, do not count:
two bodies match only if their instruction sequences are the same up to that renaming) and hashed. Prints one line per function: hash, then its name.

  ptx_fingerprint.py FILE.ptx... > before.txt
  ptx_fingerprint.py --diff before.txt after.txt   # exit 1 unless the multisets of hashes agree
"""
import collections
import hashlib
import re
import sys

NAME = re.compile(r"_Z[A-Za-z0-9_$]+")
REG = re.compile(r"%(?:rd|rs|r|p|fd|f|h|hh)[0-9]+\b|\$L__[A-Za-z0-9_]+")
DECL = re.compile(r"(\.reg\s+\.\w+\s+%\w+)<[0-9]+>")
HEAD = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(entry|func)\s")


def functions(text):
    lines = [l for l in text.splitlines()
             if l.strip() and not l.lstrip().startswith(("//", ".loc", ".file", "@@DWARF"))]
    i = 0
    while i < len(lines):
        if not HEAD.match(lines[i]):
            i += 1
            continue
        start, depth, seen = i, 0, False
        while i < len(lines):
            depth += lines[i].count("{") - lines[i].count("}")
            seen = seen or "{" in lines[i]
            i += 1
            if seen and depth == 0:
                break
            if not seen and lines[i - 1].rstrip().endswith(";"):
                break  # a declaration, not a definition
        if seen:
            yield lines[start:i]


def fingerprint(body):
    names = {}
    def canon(m):
        return names.setdefault(m.group(0), f"@N{len(names)}")
    regs = {}
    def reg(m):
        return regs.setdefault(m.group(0), f"%v{len(regs)}")
    norm = "\n".join(REG.sub(reg, DECL.sub(r"\1<>", NAME.sub(canon, l.strip()))) for l in body)
    name = next(iter(names), body[0].split()[-1])
    return hashlib.sha1(norm.encode()).hexdigest()[:16], name


def main(argv):
    if argv[:1] == ["--diff"]:
        a, b = ([l.split()[0] for l in open(p) if l.strip()] for p in argv[1:3])
        ca, cb = collections.Counter(a), collections.Counter(b)
        if ca == cb:
            print(f"identical: {sum(ca.values())} functions")
            return 0
        print(f"DIFFERENT: {sum((ca - cb).values())} only in {argv[1]}, {sum((cb - ca).values())} only in {argv[2]}")
        for p, c in ((argv[1], ca - cb), (argv[2], cb - ca)):
            for l in open(p):
                if l.split() and l.split()[0] in c:
                    print(f"  {p}: {l.rstrip()}")
        return 1
    for path in argv:
        for body in functions(open(path).read()):
            h, n = fingerprint(body)
            print(h, n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
