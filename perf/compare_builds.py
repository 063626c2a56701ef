#!/usr/bin/env python3
"""Old build against new build, through the harness, on the GPU machine.

    python3 perf/compare_builds.py OUT_DIR --old SRC:BUILD --new SRC:BUILD
                                   [--rounds 3] [--family matmul,reductions] [--quick]

SRC is a source tree (its bindings/python is the package imported), BUILD its build folder
(BUILD/lib/libgpukit.so and its plugins). The two builds take turns, round after round,
each round a fresh `perf/harness.py` process of SRC (so the old harness measures the old
code, the same way it did), old first in odd rounds and new first in even ones. A refactor
that should change nothing is judged per row by ours' speed relative to the peer measured
in the same process (the harness's ratio, peer time / ours), which cancels clock and
thermal drift between processes: change = median new ratio / median old ratio - 1. A row is
flagged when it is more than --tolerance (2%) slower. Writes OUT_DIR/compare.md and exits 1
when a row is flagged or missing on one side.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def run_harness(src: str, build: str, out: str, args: argparse.Namespace, tag: str) -> list[dict]:
    env = dict(os.environ, GPUKIT_LIBRARY=os.path.join(build, "lib", "libgpukit.so"),
               GPUKIT_LOG_LEVEL="warning",
               PYTHONPATH=os.path.join(src, "bindings", "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, os.path.join(src, "perf", "harness.py"), out, "--family", args.family,
           "--runs", str(args.runs), "--tag", tag] + (["--quick"] if args.quick else [])
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print(done.stdout[-3000:])
        raise SystemExit(f"compare_builds: the {tag} harness exited {done.returncode}")
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)["rows"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--old", required=True, metavar="SRC:BUILD")
    ap.add_argument("--new", required=True, metavar="SRC:BUILD")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--family", default="matmul,reductions")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--tolerance", type=float, default=0.02)
    args = ap.parse_args()
    sides = {"old": args.old.split(":", 1), "new": args.new.split(":", 1)}
    ratios: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    served: dict[str, str] = {}
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for side in order:
            src, build = sides[side]
            rows = run_harness(src, build, os.path.join(args.out_dir, f"{side}-{r}"), args, side)
            for row in rows:
                if "ratio" in row:
                    key = f"{row['name']} {row['dtype']}"  # names repeat across dtypes
                    ratios[side].setdefault(key, []).append(row["ratio"])
                    served[key] = row["served_by"]
            print(f"round {r + 1}/{args.rounds}: {side} done ({len(rows)} rows)", flush=True)

    names = list(dict.fromkeys(list(ratios["old"]) + list(ratios["new"])))
    lines = ["| benchmark | served by | old ratio | new ratio | change |", "|---|---|---:|---:|---:|"]
    flagged = []
    for name in names:
        old, new = ratios["old"].get(name), ratios["new"].get(name)
        if not old or not new:
            flagged.append(name)
            lines.append(f"| {name} | {served.get(name, '-')} | {'-' if not old else ''} | "
                         f"{'-' if not new else ''} | missing |")
            continue
        o, n = statistics.median(old), statistics.median(new)
        change = n / o - 1
        mark = " **slower**" if change < -args.tolerance else ""
        if mark:
            flagged.append(name)
        lines.append(f"| {name} | {served[name]} | {o:.3f} | {n:.3f} | {change:+.1%}{mark} |")
    summary = (f"{len(names)} rows, {args.rounds} rounds each side; ratio = peer time / ours "
               f"(median over rounds); {len(flagged)} row(s) more than "
               f"{args.tolerance:.0%} slower or missing")
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "compare.md"), "w") as f:
        f.write(text)
    print(text)
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
