#!/usr/bin/env python3
"""The curated per-device baseline: perf/baseline/<device>.md, one table per device, written
from the harness's results.json and overwritten by each full harness run.

    python3 perf/baseline.py RESULTS.json [RESULTS.json ...] [--out-dir perf/baseline]

The harness calls write() itself after a full run (every family, not --quick, no plugin
forced). Given several results.json files, the rows of a later file replace those of the same
family in earlier ones, so each row keeps the commit and date of the run that measured it.
Only rows of the dispatch path are kept (not the --per-plugin children's, nor declined or
failed rows). Raw output (logs, results.json, charts) stays out of the repository.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

REGENERATE = "perf/run_gpu.sh bench"
DTYPE_LABEL = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f64"}


def device_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA A100-SXM4-80GB' -> 'a100',
    'NVIDIA GeForce RTX 4090' -> 'rtx4090': the model, without vendor or memory size."""
    words = [w for w in re.split(r"[\s\-_]+", name.lower())
             if w and w not in ("nvidia", "geforce", "tesla")]
    for i, w in enumerate(words):
        if any(c.isdigit() for c in w):
            prefix = words[i - 1] if i > 0 and words[i - 1].isalpha() else ""
            return re.sub(r"[^a-z0-9]", "", prefix + w)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def merge(results: list[dict]) -> list[tuple[dict, dict]]:
    """(row, meta) pairs, families of later results replacing those of earlier ones;
    order: family by first appearance, rows in the harness's order."""
    by_family: dict[str, list[tuple[dict, dict]]] = {}
    for res in results:
        meta = res["meta"]
        if meta.get("plugins_disable"):
            continue  # a forced plugin is not what a user gets
        fresh: dict[str, list[tuple[dict, dict]]] = {}
        for row in res["rows"]:
            if "failed" in row or "declined" in row or "ratio" not in row:
                continue
            if row.get("tag", "dispatch") in ("cublaslt", "matmul_sm80", "matmul_sm90"):
                continue  # --per-plugin children
            fresh.setdefault(row["family"], []).append((row, meta))
        by_family.update(fresh)
    return [pair for rows in by_family.values() for pair in rows]


def _benchmark(row: dict) -> str:
    name = row["name"]
    label = DTYPE_LABEL.get(row.get("dtype", ""), row.get("dtype", ""))
    named = set(DTYPE_LABEL.values()) | {"tf32"}
    if label and not named & set(re.split(r"[\s\->]+", name)):
        name = f"{name} {label}"
    if _per_call(row):
        name += " *"
    return name


def _per_call(row: dict) -> bool:
    return row.get("timing", "").startswith("per call")


def _side(ms: float, row: dict, who: str, label: str) -> str:
    if f"{who}_tflops" in row:
        rate = f"{row[who + '_tflops']:.1f} TFLOP/s"
    elif f"{who}_gbs" in row:
        rate = f"{row[who + '_gbs']:.0f} GB/s"
        if who == "ours" and "ours_copy_fraction" in row and not _per_call(row):
            rate += f", {100 * row['ours_copy_fraction']:.0f}% of copy"
    else:
        rate = ""
    return f"{label} {ms:.4f} ms" + (f" ({rate})" if rate else "")


def _device(meta: dict) -> str:
    return meta["device"].removeprefix("NVIDIA ").strip()


def render(pairs: list[tuple[dict, dict]], note: str = "") -> str:
    device = _device(pairs[0][1])
    runs = []
    for row, meta in pairs:
        key = (row["family"], meta.get("commit", "unknown"), meta.get("date", ""),
               meta.get("torch", ""), meta.get("call_path", ""))
        if key not in runs:
            runs.append(key)
    measured = "; ".join(
        f"{fam} at commit {commit}, {date}" + (f", torch {torch}" if torch else "")
        + (f", {call} gpukit.call" if call else "") for fam, commit, date, torch, call in runs)
    lines = [
        f"# Baseline — {device}",
        "",
        f"Regenerate on the GPU machine with `{REGENERATE}` (or `python3 perf/harness.py OUT_DIR "
        "--baseline perf/baseline`): a full harness run overwrites this file. Measured: "
        f"{measured}.",
        "",
    ] + ([note, ""] if note else []) + [
        "Ours is `gpukit.call` through DLPack and dispatch (the plugin named is the one dispatch "
        "chose); the peer is what a user would call instead, in the same process, the two "
        "taking turns call by call. Ratio = peer time / ours (above 1: ours is faster), "
        "medians. Error: relative Frobenius norm against a float64 reference, ours (peer). "
        "Rows marked * move under 8 MiB and are timed per call with host overhead; the others "
        "on the GPU alone. Method: perf/harness.py.",
        "",
        "| family | benchmark | peer | ours | ratio | error | device | commit | date |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row, meta in pairs:
        peer = _side(row["peer_ms"], row, "peer", row.get("peer", "peer"))
        ours = _side(row["ours_ms"], row, "ours", row.get("served_by", "gpukit"))
        err = f"{row['ours_error']['rel_fro']:.2e} ({row['peer_error']['rel_fro']:.2e})"
        lines.append(f"| {row['family']} | {_benchmark(row)} | {peer} | {ours} | "
                     f"{row['ratio']:.3f} | {err} | {_device(meta)} | "
                     f"{meta.get('commit', 'unknown')} | {meta.get('date', '')[:10]} |")
    return "\n".join(lines) + "\n"


def write(results: list[dict], out_dir: str, slug: str | None = None,
          note: str = "") -> str | None:
    """Writes out_dir/<device>.md from the results (harness results.json contents); returns
    its path, or None when no row qualifies."""
    pairs = merge(results)
    if not pairs:
        return None
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{slug or device_slug(pairs[0][1]['device'])}.md")
    with open(path, "w") as f:
        f.write(render(pairs, note))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="results.json files, later ones win per family")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "baseline"))
    ap.add_argument("--device", help="file name (default: from the results' device name)")
    ap.add_argument("--note", default="", help="a paragraph to add under the header")
    args = ap.parse_args()
    results = []
    for p in args.results:
        with open(p) as f:
            results.append(json.load(f))
    devices = {r["meta"]["device"] for r in results}
    if len(devices) > 1:
        print(f"results from several devices: {sorted(devices)}", file=sys.stderr)
        return 2
    path = write(results, args.out_dir, args.device, args.note)
    if path is None:
        print("no dispatch rows in the results", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
