#!/usr/bin/env python3
"""Summarises an Nsight Compute CSV (`ncu --csv --metrics gpu__time_duration.sum,...`) per kernel family.

Kernels are grouped by name without template arguments (conv2d_mma<0, 3, 64> and conv2d_mma<0, 1, 16> are one
row); each row gives the launches, the summed duration and its share, and every other metric averaged over
the family's launches weighted by their durations (percentages such as SM, DRAM or tensor-pipe throughput).
Lines ncu or the profiled program print before the CSV header are skipped.

Usage: python3 bench/ncu_summary.py PROFILE.csv
"""
import csv
import sys
from collections import defaultdict

DURATION = "gpu__time_duration.sum"


def family(kernel_name):
    name = kernel_name.removeprefix("void ")
    return name.split("<")[0].split("(")[0]


def read_launches(path):
    """{launch id: (kernel family, {metric: value})} from the CSV rows after the header."""
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines()
    except OSError as e:
        sys.exit(f"ncu_summary: {path}: {e.strerror}")
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"ncu_summary: {path}: no ncu CSV header (\"ID\",...) found")
    launches = {}
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Value") is None:  # a line the profiled program printed among ncu's rows
            continue
        value = row["Metric Value"].replace(",", "")
        try:
            number = float(value)
        except ValueError:
            continue
        kernel, metrics = launches.setdefault(row["ID"], (family(row["Kernel Name"]), {}))
        metrics[row["Metric Name"]] = number
    return launches


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    launches = read_launches(sys.argv[1])
    rows = defaultdict(lambda: {"launches": 0, "ns": 0.0, "weighted": defaultdict(float)})
    names = []
    for kernel, metrics in launches.values():
        ns = metrics.get(DURATION, 0.0)
        row = rows[kernel]
        row["launches"] += 1
        row["ns"] += ns
        for name, value in metrics.items():
            if name != DURATION:
                row["weighted"][name] += value * ns
                if name not in names:
                    names.append(name)
    total = sum(r["ns"] for r in rows.values())
    print(f"{len(launches)} launches, {total / 1e3:.1f} us of kernel time\n")
    print("| kernel | launches | time (us) | share | " + " | ".join(names) + " |")
    print("| --- " * (4 + len(names)) + "|")
    for kernel, r in sorted(rows.items(), key=lambda kv: -kv[1]["ns"]):
        averages = [r["weighted"][n] / r["ns"] if r["ns"] else 0.0 for n in names]
        print(f"| {kernel} | {r['launches']} | {r['ns'] / 1e3:.1f} | {100 * r['ns'] / total:.1f} % | "
              + " | ".join(f"{a:.3g}" for a in averages) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
