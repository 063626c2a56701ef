"""DLPack exchange and tiny-op call overhead: GPUkit against PyTorch, in one process.

    python3 perf/python/bench_dlpack.py OUT.json [--device cuda|cpu] [--repeats N]

Writes OUT.json and OUT.md (a markdown table). Host-side costs are perf_counter_ns medians
over batches (per call = batch time / batch size); GPU time of the tiny op is measured
with CUDA events around a batch. Without torch, the PyTorch rows are left out; without a
CUDA device, everything runs on the cpu device.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))

import numpy as np  # noqa: E402

import gpukit  # noqa: E402
from gpukit import ffi, lib  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def per_call_ns(fn, batch=200, repeats=30, warmup=3):
    for _ in range(warmup):
        for _ in range(batch):
            fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter_ns() - t0) / batch)
    return {"median_ns": statistics.median(samples), "min_ns": min(samples),
            "samples": len(samples), "batch": batch}


def gpu_ms_per_call(fn, sync, batch=200):
    if torch is None or not torch.cuda.is_available():
        return None
    fn()
    sync()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(batch):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / batch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--device", default=None)
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args()
    cuda = [d for d in gpukit.devices() if d.is_cuda]
    device = args.device or ("cuda" if cuda else "cpu")
    gdev = gpukit.runtime().device(device)
    tdev = f"cuda:{gdev.ordinal}" if gdev.is_cuda else "cpu"
    results = {"device": str(gdev), "device_name": gdev.name, "python": platform.python_version(),
               "gpukit": gpukit.library_version(), "torch": getattr(torch, "__version__", None),
               "numpy": np.__version__, "rows": []}

    def row(name, stats, note=""):
        stats = dict(stats)
        stats.update(name=name, note=note)
        results["rows"].append(stats)
        print(f"{name:55s} {stats['median_ns'] / 1000:9.2f} us  {note}", flush=True)

    r = args.repeats
    shape = (1024, 1024)
    # 1. DLPack exchange.
    if torch is not None:
        t = torch.ones(shape, device=tdev)
        g = gpukit.from_dlpack(t)
        assert g.data_ptr == t.data_ptr()
        row("gpukit.from_dlpack(torch tensor)", per_call_ns(lambda: gpukit.from_dlpack(t), repeats=r))
        row("torch.from_dlpack(gpukit array)", per_call_ns(lambda: torch.from_dlpack(g), repeats=r))
        row("torch.from_dlpack(torch tensor) [baseline]",
            per_call_ns(lambda: torch.from_dlpack(t), repeats=r))
    else:
        a = np.ones(shape, np.float32)
        g = gpukit.from_dlpack(a)
        row("gpukit.from_dlpack(numpy array)", per_call_ns(lambda: gpukit.from_dlpack(a), repeats=r))
        row("numpy.from_dlpack(gpukit array)", per_call_ns(lambda: np.from_dlpack(g), repeats=r))
        row("numpy.from_dlpack(numpy array) [baseline]",
            per_call_ns(lambda: np.from_dlpack(a), repeats=r))

    # 2. The C ABI alone: export + import + release, through cffi.
    rt = gpukit.runtime().ptr
    tensor = g._t
    m_out = ffi.new("DLManagedTensorVersioned**")
    t_out = ffi.new("gk_tensor**")

    def c_round_trip():
        lib.gk_tensor_to_dlpack_versioned(tensor, 0, m_out)
        lib.gk_tensor_from_dlpack_versioned(rt, m_out[0], t_out)
        lib.gk_tensor_release(t_out[0])

    row("C: gk_tensor_to_dlpack_versioned + from_dlpack + release (cffi)",
        per_call_ns(c_round_trip, batch=2000, repeats=r), "includes 3 cffi call overheads")

    # 3. Tiny op: 1-element add.
    ga = gpukit.ones((1,), device=gdev)
    gb = gpukit.ones((1,), device=gdev)
    row("gpukit a + b (1 element)", per_call_ns(lambda: ga + gb, repeats=r),
        "host time per call incl. output allocation")
    if torch is not None:
        ta = torch.ones(1, device=tdev)
        tb = torch.ones(1, device=tdev)
        row("torch a + b (1 element)", per_call_ns(lambda: ta + tb, repeats=r))
        if gdev.is_cuda:
            sync = torch.cuda.synchronize
            results["gpu_ms_per_call"] = {
                "gpukit_add_1": gpu_ms_per_call(lambda: ga + gb, sync),
                "torch_add_1": gpu_ms_per_call(lambda: ta + tb, sync)}
    else:
        na, nb = np.ones(1, np.float32), np.ones(1, np.float32)
        row("numpy a + b (1 element)", per_call_ns(lambda: na + nb, repeats=r))

    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    md = os.path.splitext(args.out)[0] + ".md"
    with open(md, "w") as f:
        f.write(f"# DLPack and tiny-op overhead — {results['device_name']} ({results['device']})\n\n")
        f.write(f"Python {results['python']}, gpukit {results['gpukit']}, torch "
                f"{results['torch']}, numpy {results['numpy']}. Medians of "
                f"{r} batches, perf_counter_ns.\n\n| case | median µs/call | min µs | note |\n"
                "|---|---:|---:|---|\n")
        for row_ in results["rows"]:
            f.write(f"| {row_['name']} | {row_['median_ns'] / 1000:.2f} | "
                    f"{row_['min_ns'] / 1000:.2f} | {row_['note']} |\n")
        if results.get("gpu_ms_per_call"):
            f.write("\nGPU time per 1-element add (CUDA events over 200 calls): " +
                    ", ".join(f"{k} {v * 1000:.2f} µs" for k, v in
                              results["gpu_ms_per_call"].items() if v is not None) + "\n")
    print(f"wrote {args.out} and {md}")


if __name__ == "__main__":
    main()
