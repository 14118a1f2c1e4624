#!/usr/bin/env python3
"""PTX of every kernel instance the runners compile, one file per entry point, and a comparison of two such
snapshots: the check that a host-side refactor left the device code alone.

  scripts/ptx-snapshot.py dump LAB OUTDIR     # `lab source R --ptx` for every runner, variant and the
                                              # parameter values that select other instances
  scripts/ptx-snapshot.py compare OLD NEW     # per entry: identical, identical but for the parameter loads
                                              # (ld.param of a struct instead of scalars), the same operations
                                              # in another order, or changed (with the operation counts)

Entries are matched by their demangled name without the parameter list, so a kernel that moved from extern "C"
scalars to one parameter struct still pairs with its old self. Exit 1 when an entry changed or went missing.
"""
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

# Values of parameters that pick other template instances or defines (the rest only change the launch).
SWEEPS = {
    "HEAD_DIM": ["16", "32", "64", "128", "256"],
    "DTYPE": ["f16", "bf16"],
    "BLOCK_M": ["16", "32", "64"],
    "FWD_TILE": None,  # None: every choice
    "DQ_TILE": None,
    "DKDV_TILE": None,
}


def param_sets(runner):
    params = {p["name"]: p for p in runner["params"]}
    sets = [{}]
    for name, values in SWEEPS.items():
        if name not in params:
            continue
        if values is None:
            values = [c for c in params[name].get("choices", []) if c != "auto"]
        sets += [{name: v} for v in values]
    return sets


def dump(lab, outdir):
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    runners = json.loads(subprocess.run([lab, "list", "--json"], check=True, capture_output=True, text=True).stdout)
    entries = {}
    for r in runners:
        for v in r["variants"]:
            for ps in param_sets(r):
                cmd = [lab, "source", r["name"], "--variant", v["name"], "--ptx", "--arch", "sm_90"]
                for k, val in ps.items():
                    cmd += ["--param", f"{k}={val}"]
                run = subprocess.run(cmd, capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"skip {' '.join(cmd[1:])}: {run.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                    continue
                for name, body in split_entries(run.stdout):
                    entries.setdefault(name, body)
    for name, body in entries.items():
        (out / (re.sub(r"[^A-Za-z0-9_]", "_", name)[:150] + ".ptx")).write_text(name + "\n" + body)
    print(f"{len(entries)} entries in {out}")


def split_entries(ptx):
    """(mangled name, text from .entry to the closing brace) for every entry of a PTX module."""
    for m in re.finditer(r"^\.(?:visible|weak) \.entry (\S+?)\(", ptx, re.M):
        end = ptx.find("\n}\n", m.start())
        yield m.group(1), ptx[m.start():end + 2]


def demangled_base(mangled):
    text = subprocess.run(["c++filt", mangled], capture_output=True, text=True).stdout.strip()
    depth = 0
    for i, ch in enumerate(text):  # cut the parameter list: the first '(' outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            return text[:i]
    return text


def renumbered(lines):
    """Registers renamed by order of first use (%r12 -> %r<1>), so a shifted numbering compares equal."""
    names = {}

    def rename(m):
        return names.setdefault(m.group(0), f"%{m.group(1)}<{len(names)}>")

    return [re.sub(r"%([a-z]+)\d+", rename, line) for line in lines]


def source_free(body, mangled):
    """The entry's lines without source positions (.loc moves when a kernel's source lines move)."""
    body = body.replace(mangled, "ENTRY")
    return [s.strip() for s in body.splitlines() if not s.strip().startswith((".loc", ".file"))]


def instructions(body, mangled):
    return renumbered(source_free(body, mangled))


def without_parameter_passing(body, mangled):
    """The instructions with parameter declarations and loads removed (and register declarations, whose
    counts move with the loads), registers numbered after the removal."""
    skip = (".param", "ld.param", "cvta.to.global", ".reg", ")")
    return renumbered([s for s in source_free(body, mangled) if not s.startswith(skip) and ".entry " not in s])


def operations(body, mangled):
    """The entry's operations in order, without parameter loads, conversions and moves (which move with how
    the parameters arrive)."""
    ops = []
    for line in source_free(body, mangled):
        words = line.split()
        if not words or line.startswith((".", "//", "{", "}", ")", "$")):
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        if not op.startswith(("ld.param", "cvt", "mov")):
            ops.append(op.rstrip(";"))
    return ops


def load(folder):
    out = {}
    for f in Path(folder).glob("*.ptx"):
        name, body = f.read_text().split("\n", 1)
        out[demangled_base(name)] = (name, body)
    return out


def compare(old_dir, new_dir):
    old, new = load(old_dir), load(new_dir)
    counts = {"identical": 0, "parameters": 0, "reordered": 0}
    changed, missing = [], []
    for base, (name, body) in sorted(old.items()):
        if base not in new:
            missing.append(base)
            continue
        nname, nbody = new[base]
        before, after = operations(body, name), operations(nbody, nname)
        if instructions(body, name) == instructions(nbody, nname):
            counts["identical"] += 1
        elif without_parameter_passing(body, name) == without_parameter_passing(nbody, nname):
            counts["parameters"] += 1
        elif sorted(before) == sorted(after):
            counts["reordered"] += 1
        else:
            gone = collections.Counter(before) - collections.Counter(after)
            came = collections.Counter(after) - collections.Counter(before)
            changed.append(f"{base}: {len(before)} -> {len(after)} operations; "
                           f"fewer {dict(gone)}, more {dict(came)}")
    added = sorted(set(new) - set(old))
    print(f"{len(old)} entries before, {len(new)} after: {counts['identical']} identical (but for source lines "
          f"and register numbers), {counts['parameters']} identical but for parameter loads, "
          f"{counts['reordered']} the same operations in another order, {len(changed)} changed, "
          f"{len(missing)} missing, {len(added)} new")
    for line in changed:
        print(f"  changed: {line}")
    for b in missing:
        print(f"  missing: {b}")
    for b in added:
        print(f"  new: {b}")
    return 1 if changed or missing else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
