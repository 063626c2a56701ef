#!/usr/bin/env python3
"""Weight loading, side by side in one process on the GPU machine: a sharded bf16
SafeTensors checkpoint (about 2 GiB in 4 shards, random values) from the page cache to
the GPU, by `safetensors.torch.load_file(shard, device="cuda")` for each shard (what HF
transformers does) and by `gpukit.load_weights(folder, device=...)` + `.load()`.

    python3 perf/weights/bench_load.py [--gib 2] [--shards 4] [--runs 5] [--dir /tmp/...]

Each side opens the checkpoint anew in every run (nothing cached between runs), and its
time runs until every tensor is on the GPU (synchronized). Before timing, the files are read
once so both sides read from the page cache. Pinned host-to-device bandwidth from the same
run is printed as the limit. Every tensor of ours is compared bit for bit with the peer's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
from safetensors.torch import load_file, save_file

import gpukit


def make_checkpoint(folder: str, gib: float, shards: int) -> list[str]:
    """Writes the shards and model.safetensors.index.json (kept between invocations)."""
    os.makedirs(folder, exist_ok=True)
    index_path = os.path.join(folder, "model.safetensors.index.json")
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    if os.path.exists(index_path):
        return [os.path.join(folder, n) for n in names]
    per_shard = int(gib * 2**30 / shards)
    # Tensors of a 1B-class model's shapes: [2048, 8192] bf16 is 32 MiB.
    rows, cols = 2048, 8192
    per_tensor = rows * cols * 2
    weight_map = {}
    generator = torch.Generator().manual_seed(0)
    for s, name in enumerate(names):
        tensors = {}
        for t in range(max(1, per_shard // per_tensor)):
            key = f"layers.{s}.{t}.weight"
            tensors[key] = torch.randn(rows, cols, generator=generator).to(torch.bfloat16)
            weight_map[key] = name
        save_file(tensors, os.path.join(folder, name))
    with open(index_path, "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return [os.path.join(folder, n) for n in names]


def warm_page_cache(paths: list[str]) -> int:
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(64 << 20):
                total += len(chunk)
    return total


def time_peer(paths: list[str]) -> tuple[float, dict]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = {}
    for p in paths:
        out.update(load_file(p, device="cuda"))
    torch.cuda.synchronize()
    return time.perf_counter() - start, out


def time_ours(folder: str, device: int) -> tuple[float, object]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    weights = gpukit.load_weights(folder, device=device)
    weights.load()
    torch.cuda.synchronize()
    return time.perf_counter() - start, weights


def pinned_h2d_gbps(nbytes: int = 1 << 30, runs: int = 5) -> float:
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    host.random_(0, 255)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(runs + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dev.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return nbytes / statistics.median(times[1:]) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/gpukit-bench-weights")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_load: no CUDA device; nothing to measure")
        return 0
    paths = make_checkpoint(args.dir, args.gib, args.shards)
    total = warm_page_cache(paths)
    device = gpukit.default_device()  # the first CUDA device
    # One untimed run each: CUDA contexts, cuBLAS-free code paths and allocator pools warm.
    time_peer(paths)
    _, w = time_ours(args.dir, device)
    w.close()
    peer_t, ours_t = [], []
    mismatches = 0
    for run in range(args.runs):
        t, peer = time_peer(paths)
        peer_t.append(t)
        t, weights = time_ours(args.dir, device)
        ours_t.append(t)
        if run == 0:
            for name, ref in peer.items():
                mine = torch.from_dlpack(weights[name])
                mismatches += not torch.equal(mine.view(torch.int16), ref.view(torch.int16))
        del peer
        weights.close()
        del weights
        torch.cuda.empty_cache()
    limit = pinned_h2d_gbps()
    peer_s, ours_s = statistics.median(peer_t), statistics.median(ours_t)
    gib = total / 2**30
    print(f"checkpoint: {gib:.2f} GiB bf16 in {len(paths)} shards, from the page cache; "
          f"{args.runs} runs each, median")
    print(f"{'side':<34} {'seconds':>8} {'GB/s':>7}")
    print(f"{'safetensors.torch.load_file (peer)':<34} {peer_s:8.3f} {total / peer_s / 1e9:7.2f}")
    print(f"{'gpukit.load_weights + load':<34} {ours_s:8.3f} {total / ours_s / 1e9:7.2f}")
    print(f"{'pinned host->device copy (limit)':<34} {'':>8} {limit:7.2f}")
    print(f"ratio (peer time / ours): {peer_s / ours_s:.2f}x; "
          f"bit-exact tensors: {mismatches == 0} ({mismatches} differ)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
