#!/usr/bin/env python3
"""Per-kernel times of `lab bench train-step --json --kernels` and `--kernels-alone` side by side.

As launched, a launch's time includes the other lanes' kernels running beside it; alone, it is the launch's
own. A kernel whose as-launched time is far above its alone time is waiting on its neighbours, not slow.
Also prints, from the as-launched profile, when each lane's last launch ended (which lane is the tail), and
each lane's launches summed alone (the least time that lane's work takes with the GPU to itself).

  python3 bench/launch_profiles.py train-step-kernels.json.gz train-step-kernels-alone.json.gz [--rows 30]
"""
import argparse
import collections
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        report = json.load(f)
    if "launch_profile" not in report:
        sys.exit(f"{path}: no launch_profile (run lab bench train-step with --kernels or --kernels-alone)")
    return report


def per_kernel(profile):
    totals = collections.defaultdict(lambda: [0, 0.0])
    for launch in profile["launches"]:
        row = totals[(launch["kernel"], launch["lane"])]
        row[0] += 1
        row[1] += launch["ms"]
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("as_launched", help="JSON of --kernels (.json or .json.gz)")
    parser.add_argument("alone", help="JSON of --kernels-alone (.json or .json.gz)")
    parser.add_argument("--rows", type=int, default=30, help="kernels listed, the most alone time first")
    args = parser.parse_args()
    launched, alone = load(args.as_launched), load(args.alone)
    for path, report, timing in ((args.as_launched, launched, "as launched"), (args.alone, alone, "alone")):
        if report["launch_profile"].get("timing") != timing:
            sys.exit(f"{path}: its launch_profile.timing is not \"{timing}\"")
    print(f"{launched['device']}: iteration {launched['iteration_ms']:.3f} ms (median of the timed iterations)")
    for name, report in (("as launched", launched), ("alone", alone)):
        p = report["launch_profile"]
        print(f"  {name:12s} {len(p['launches'])} launches, {p['launch_ms']:.3f} ms summed in a {p['span_ms']:.3f} ms span")

    ends = collections.defaultdict(float)
    for launch in launched["launch_profile"]["launches"]:
        ends[launch["lane"]] = max(ends[launch["lane"]], launch["start_ms"] + launch["ms"])
    print("lanes' last end (as launched): " + ", ".join(f"lane {k} {v:.3f} ms" for k, v in sorted(ends.items())))
    own = collections.defaultdict(float)
    for launch in alone["launch_profile"]["launches"]:
        own[launch["lane"]] += launch["ms"]
    print("lanes' launches summed alone: " + ", ".join(f"lane {k} {v:.3f} ms" for k, v in sorted(own.items())))

    a, b = per_kernel(launched["launch_profile"]), per_kernel(alone["launch_profile"])
    print(f"{'alone ms':>9} {'launched ms':>12} {'ratio':>6} {'launches':>8} lane kernel")
    for key in sorted(set(a) | set(b), key=lambda k: -b.get(k, [0, 0.0])[1])[: args.rows]:
        n, own = b.get(key, [0, 0.0])
        shared = a.get(key, [0, 0.0])[1]
        ratio = f"{shared / own:6.2f}" if own > 0 else "     -"
        print(f"{own:9.3f} {shared:12.3f} {ratio} {n:8d} {key[1]:4d} {key[0]}")


if __name__ == "__main__":
    main()
