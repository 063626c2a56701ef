"""The Python side of a JIT launch, without a GPU: RawKernel(...)(grid, block, args) up to the
C call, with gk_jit_launch replaced by a stand-in that returns OK (docs/jit.md, "Benchmark").

  python perf/jit/bench_launch_python.py [--iters 200000]

Measures the per-call host cost that bench_jit.py's launch overhead holds beside the C call
and the driver: argument packing, the device lookup and the launch struct. Runs anywhere
gpukit imports (the cpu device's GPUArrays stand in for device arrays: their packing is the
same). Prints microseconds per call, the median of 7 runs.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import gpukit
from gpukit import _jit_module, jit


class _LibWithoutLaunch:
    """gpukit's cffi library with gk_jit_launch answering OK at once."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    @staticmethod
    def gk_jit_launch(kernel, args):
        return 0


class _Module:
    """What a Function reads of its RawModule."""

    def __init__(self, device):
        self.device = device
        self.runtime = device.runtime


def per_call_us(call, iters):
    for _ in range(1000):
        call()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        samples.append((time.perf_counter() - t0) / iters)
    return statistics.median(samples) * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=200000)
    args = p.parse_args()
    dev = gpukit.runtime().device("cpu")
    x = gpukit.zeros(1024, device=dev)
    y = gpukit.zeros(1024, device=dev)
    function = _jit_module.Function(_Module(dev), "bench_axpy", jit.ffi.NULL)
    kernel = jit.RawKernel("", "bench_axpy")
    kernel._by_device[(id(dev.runtime), dev.id)] = function
    a, n = np.float32(1.0), np.int32(1024)
    _jit_module.lib = _LibWithoutLaunch(_jit_module.lib)
    rows = [("Function(grid, block, (GPUArray, GPUArray, f32, i32))",
             lambda: function((4,), (256,), (x, y, a, n))),
            ("RawKernel(grid, block, (GPUArray, GPUArray, f32, i32))",
             lambda: kernel((4,), (256,), (x, y, a, n))),
            ("RawKernel(grid, block, (GPUArray, GPUArray, float, int))",
             lambda: kernel((4,), (256,), (x, y, 1.0, 1024)))]
    for name, call in rows:
        print(f"{name:58} {per_call_us(call, args.iters):6.2f} us/call")


if __name__ == "__main__":
    main()
