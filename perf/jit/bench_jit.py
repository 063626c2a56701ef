"""GPUkit's JIT kernels beside CuPy's, in one process on one GPU (docs/jit.md, "Benchmark").

  python perf/jit/bench_jit.py [--iters 2000] [--json out.json]

Three measurements, each the median of repeated runs after warm-up (the launch variants in
alternating rounds):
  1. launch overhead of a cached kernel: host time per call of
     gpukit.RawKernel(...)(grid, block, args) and cupy.RawKernel(...)(grid, block, args)
     with the same tiny kernel and the same CuPy arrays (GPUkit takes them zero copy), and the
     device time of the same calls measured with CUDA events (both libraries' launches on
     the legacy default stream);
  2. first use with a warm disk cache: a fresh child process (per library and per run, the
     libraries alternating) that imports the library, launches another kernel (the process's
     first module load, see WARM_UP), compiles the kernel (served from the disk cache filled
     beforehand) and launches it once, timed inside the child from before the RawKernel is
     created to after the first launch has finished (an event or a device synchronize;
     GPUkit's time also split into compile, launch and wait);
  3. the fused kernel of docs/jit.md (y = relu(a * x + b) in one kernel) against the two
     library calls it replaces in CuPy (cupy.multiply/add + cupy.maximum), timed with events.

Needs a CUDA device, CuPy and NVRTC. Prints a table; --json writes the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

KERNEL = r'''
extern "C" __global__ void bench_axpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''

FUSED = r'''
extern "C" __global__ void fused_affine_relu(const float* x, float* y, float a, float b, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float v = a * x[i] + b;
    y[i] = v > 0.f ? v : 0.f;
  }
}
'''

# Another kernel, which each child compiles and launches before the timed one: a process's
# first module load pays the driver's one-time setup (about 0.25 ms for GPUkit here; CuPy's
# first kernel also pays its own setup, tens of milliseconds), which a process that uses a
# library has paid once. Both children are then in the same state.
WARM_UP = r'''
extern "C" __global__ void bench_warm_up(float* y) { y[threadIdx.x] += 1.f; }
'''

# The child of measurement 2: prints the seconds from creating the kernel object to the end
# of its first launch (the import, the runtime, the arrays and the warm-up kernel are not
# counted: both libraries make them once per process), then GPUkit's parts: the compile
# (cache lookup and module load), the first launch (with the kernel lookup) and the wait
# for it. Both children wait for the kernel alone (an event, a device synchronize): a copy
# back would add the first device-to-host copy's setup (GPUkit pins its staging chunks on
# first use), no JIT cost.
CHILD = r'''
import json, sys, time
lib, source_file, warm_up_file = sys.argv[1], sys.argv[2], sys.argv[3]
if lib == "gpukit":
    import gpukit, numpy as np
    dev = [d for d in gpukit.devices() if d.is_cuda][0]
    x = gpukit.asarray(np.ones(1024, np.float32), device=dev)
    y = gpukit.asarray(np.ones(1024, np.float32), device=dev)
    gpukit.RawKernel(open(warm_up_file).read(), "bench_warm_up")((1,), (32,), (y,))
    done = gpukit.Event(dev)
    done.record().synchronize()
    src = open(source_file).read()
    t0 = time.perf_counter()
    k = gpukit.RawKernel(src, "bench_axpy")
    k.compile(dev)
    t1 = time.perf_counter()
    k((4,), (256,), (x, y, np.float32(2), np.int32(1024)))
    t2 = time.perf_counter()
    done.record().synchronize()
    t3 = time.perf_counter()
    print(json.dumps({"total": t3 - t0, "compile": t1 - t0, "launch": t2 - t1, "wait": t3 - t2}))
else:
    import cupy as cp, numpy as np
    x = cp.ones(1024, cp.float32); y = cp.ones(1024, cp.float32)
    cp.RawKernel(open(warm_up_file).read(), "bench_warm_up")((1,), (32,), (y,))
    cp.cuda.runtime.deviceSynchronize()
    src = open(source_file).read()
    t0 = time.perf_counter()
    k = cp.RawKernel(src, "bench_axpy")
    k((4,), (256,), (x, y, np.float32(2), np.int32(1024)))
    cp.cuda.runtime.deviceSynchronize()
    print(json.dumps({"total": time.perf_counter() - t0}))
'''


def median_us(samples):
    return statistics.median(samples) * 1e6


def host_launch_us(launches, iters, sync, rounds=15):
    """Median host microseconds per call of each of `launches` (name -> callable), measured
    in alternating rounds so that drift of the host (clock, other load) reaches all alike."""
    for launch in launches.values():
        for _ in range(200):
            launch()
    sync()
    samples = {name: [] for name in launches}
    for _ in range(rounds):
        for name, launch in launches.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                launch()
            t1 = time.perf_counter()
            sync()
            samples[name].append((t1 - t0) / iters)
    return {name: median_us(s) for name, s in samples.items()}


def event_us(cp, launch, iters):
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(50):
        launch()
    samples = []
    for _ in range(7):
        start.record()
        for _ in range(iters):
            launch()
        end.record()
        end.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, end) / 1e3 / iters)
    return median_us(samples)


def first_use_s(libs, source_file, warm_up_file, runs):
    """Per library of `libs`, the median child's times (seconds, by part) over `runs` fresh
    processes; the libraries' children alternate, so that drift of the host reaches all."""
    samples = {lib: [] for lib in libs}
    for _ in range(runs):
        for lib in libs:
            out = subprocess.run([sys.executable, "-c", CHILD, lib, source_file, warm_up_file],
                                 check=True, capture_output=True, text=True,
                                 env=os.environ.copy())
            samples[lib].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for s in samples.values():
        s.sort(key=lambda t: t["total"])
    return {lib: s[len(s) // 2] for lib, s in samples.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--first-use-runs", type=int, default=11)
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args()

    try:
        import cupy as cp
    except ImportError as e:
        sys.exit(f"bench_jit: CuPy is needed for the side-by-side run ({e}); pip install "
                 "cupy-cuda13x (or cupy-cuda12x)")
    import numpy as np

    import gpukit

    dev = next((d for d in gpukit.devices() if d.is_cuda), None)
    if dev is None:
        sys.exit("bench_jit: no CUDA device visible to GPUkit")
    cp.cuda.Device(dev.ordinal).use()
    results = {"device": dev.props["name"], "nvrtc": dev.props["nvrtc_version"]}

    # 1. launch overhead of a cached kernel, same CuPy arrays for both.
    n = 1024
    x, y = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
    gk_kernel = gpukit.RawKernel(KERNEL, "bench_axpy")
    cp_kernel = cp.RawKernel(KERNEL, "bench_axpy")
    a, nn = np.float32(1.0), np.int32(n)
    gk_launch = lambda: gk_kernel((4,), (256,), (x, y, a, nn))  # noqa: E731
    cp_launch = lambda: cp_kernel((4,), (256,), (x, y, a, nn))  # noqa: E731
    sync = cp.cuda.runtime.deviceSynchronize
    gx, gy = gpukit.from_dlpack(x), gpukit.from_dlpack(y)
    gk_native = lambda: gk_kernel((4,), (256,), (gx, gy, a, nn))  # noqa: E731
    results["launch_host_us"] = host_launch_us({"gpukit_cupy_arrays": gk_launch,
                                                "gpukit_gpuarrays": gk_native,
                                                "cupy": cp_launch}, args.iters, sync)
    results["launch_device_us"] = {"gpukit": event_us(cp, gk_launch, args.iters),
                                   "cupy": event_us(cp, cp_launch, args.iters)}
    # Same results from both.
    x2, y_gk, y_cp = cp.arange(n, dtype=cp.float32), cp.zeros(n, cp.float32), cp.zeros(n, cp.float32)
    gk_kernel((4,), (256,), (x2, y_gk, np.float32(3), nn))
    cp_kernel((4,), (256,), (x2, y_cp, np.float32(3), nn))
    sync()
    results["launch_max_abs_diff"] = float(cp.abs(y_gk - y_cp).max())

    # 2. first use with a warm disk cache (each library's own cache, filled once first).
    with tempfile.TemporaryDirectory() as tmp:
        source_file = os.path.join(tmp, "bench_axpy.cu")
        with open(source_file, "w") as f:
            f.write(KERNEL + "// first-use\n")
        os.environ["GPUKIT_CACHE_DIR"] = os.path.join(tmp, "gpukit-cache")
        os.environ["CUPY_CACHE_DIR"] = os.path.join(tmp, "cupy-cache")
        warm_up_file = os.path.join(tmp, "bench_warm_up.cu")
        with open(warm_up_file, "w") as f:
            f.write(WARM_UP)
        first_use_s(("gpukit", "cupy"), source_file, warm_up_file, 1)  # fill the caches
        first = first_use_s(("gpukit", "cupy"), source_file, warm_up_file, args.first_use_runs)
        gk_first, cp_first = first["gpukit"], first["cupy"]
        results["first_use_warm_disk_ms"] = {"gpukit": gk_first["total"] * 1e3,
                                             "cupy": cp_first["total"] * 1e3}
        results["first_use_gpukit_parts_ms"] = {part: gk_first[part] * 1e3
                                                for part in ("compile", "launch", "wait")}

    # 3. the fused kernel against two library calls.
    n = 1 << 24
    xs, ys = cp.random.standard_normal(n, dtype=cp.float32), cp.empty(n, cp.float32)
    fused = gpukit.RawKernel(FUSED, "fused_affine_relu")
    blocks = min((n + 255) // 256, dev.props["sm_count"] * 32)
    fused_launch = lambda: fused((blocks,), (256,), (xs, ys, np.float32(2), np.float32(-0.5),  # noqa: E731
                                                     np.int64(n)))
    two_calls = lambda: cp.maximum(xs * np.float32(2) + np.float32(-0.5), 0)  # noqa: E731
    results["fused_us"] = {"gpukit_fused": event_us(cp, fused_launch, 50),
                           "cupy_two_calls": event_us(cp, two_calls, 50)}
    fused_launch()
    sync()
    results["fused_max_abs_diff"] = float(cp.abs(ys - two_calls()).max())

    print(f"device: {results['device']} (NVRTC {results['nvrtc']})")
    print(f"{'measurement':44} {'gpukit':>12} {'cupy':>12} {'ratio':>7}")
    rows = [("launch, host us/call (CuPy arrays)", results["launch_host_us"]["gpukit_cupy_arrays"],
             results["launch_host_us"]["cupy"]),
            ("launch, host us/call (GPUArrays)", results["launch_host_us"]["gpukit_gpuarrays"],
             results["launch_host_us"]["cupy"]),
            ("launch, device us/call (events)", results["launch_device_us"]["gpukit"],
             results["launch_device_us"]["cupy"]),
            ("first use, warm disk cache, ms", results["first_use_warm_disk_ms"]["gpukit"],
             results["first_use_warm_disk_ms"]["cupy"]),
            ("relu(2x-0.5) 16M f32, us (fused vs 2 calls)", results["fused_us"]["gpukit_fused"],
             results["fused_us"]["cupy_two_calls"])]
    for name, g, c in rows:
        print(f"{name:44} {g:12.2f} {c:12.2f} {g / c:7.2f}")
    parts = results["first_use_gpukit_parts_ms"]
    print(f"GPUkit's first use, ms: compile {parts['compile']:.2f}, launch {parts['launch']:.2f}, "
          f"wait {parts['wait']:.2f}")
    print(f"max |diff|: launch {results['launch_max_abs_diff']}, "
          f"fused {results['fused_max_abs_diff']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
