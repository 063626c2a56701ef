"""Host overhead of one gpukit.call on the cpu device, split into Python and C.

    python3 perf/python/bench_call_overhead.py [--json OUT.json] [--batch N] [--repeats N]
                                               [--cold]

Each op runs on tiny inputs ([1, 8]) whose kernel costs next to nothing, with inputs,
outputs and attributes prepared once, as perf/harness.py does (`out=` and `attrs=` given):
what is left is the per-call cost of the binding and of the C dispatch behind it. Rows:

  call     gpukit.call(op, inputs, attrs=attrs, out=outs)   (what the harness times)
  capi     lib.gk_op_call(runtime, name, args) through cffi with a gk_op_args built once:
           the C path plus cffi's own call cost, no binding code
  python   call - capi: the binding's own share

Per-call numbers are medians over `repeats` batches of `batch` calls (perf_counter_ns).
With --cold, each call is timed alone right after a pass over 32 MiB that evicts the CPU
caches, as a call after a wait for the GPU finds them (perf/harness.py's launch-bound rows
synchronize before each call); the median of `repeats` × 10 such calls.
Library: $GPUKIT_LIBRARY, else the checkout's build tree (see bindings/python/gpukit/_lib.py).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))

import numpy as np  # noqa: E402

import gpukit  # noqa: E402
from gpukit import ffi, lib  # noqa: E402
from bench_dlpack import per_call_ns  # noqa: E402  (the same batching as the DLPack bench)


def cases():
    """(label, op, inputs, outputs, attrs) on the cpu device; the attrs each op takes in
    perf/harness.py (softmax and add: an empty dict)."""
    rng = np.random.default_rng(0)

    def arr(*shape):
        return gpukit.asarray(rng.standard_normal(shape).astype(np.float32), device="cpu")

    x, y, w, b = arr(1, 8), arr(1, 8), arr(8), arr(8)
    return [
        ("add [1,8] f32", "add", [x, y], [arr(1, 8)], {}),
        ("softmax [1,8] f32", "softmax", [x], [arr(1, 8)], {}),
        ("layernorm [1,8] f32", "layernorm", [x, w, b], [arr(1, 8)], {"eps": 1e-5}),
        ("rmsnorm [1,8] f32", "rmsnorm", [x, w], [arr(1, 8)], {"eps": 1e-6}),
    ]


def raw_call(op, inputs, outs, attrs):
    """A no-Python-work gk_op_call: every C structure built once, up front."""
    from gpukit._array import _attrs

    tensors = ffi.new("gk_tensor*[]", len(inputs) + len(outs))
    for i, t in enumerate(list(inputs) + list(outs)):
        tensors[i] = t._t
    args = ffi.new("gk_op_args*")
    args.struct_size = ffi.sizeof("gk_op_args")
    args.inputs, args.num_inputs = tensors, len(inputs)
    args.outputs, args.num_outputs = tensors + len(inputs), len(outs)
    keep = None
    if attrs:
        arr, count, keep = _attrs(attrs)
        args.attrs, args.num_attrs = arr, count
        keep = (arr, keep)
    name = ffi.new("char[]", op.encode())
    rt = inputs[0]._rt.ptr
    call = lib.gk_op_call

    # cffi frees what ffi.new returned once nothing references it, and a pointer stored in
    # a struct field is no reference: the closure keeps `tensors` and `name` alive.
    def fn(keep=keep, tensors=tensors, name=name):
        if call(rt, name, args) != 0:
            raise RuntimeError(gpukit._lib.last_error())
    return fn


_EVICT = np.ones(32 * 1024 * 1024 // 8)


def cold_call_ns(fn, samples: int) -> float:
    """Median ns of fn() called alone after a pass that evicts the CPU caches."""
    import statistics
    import time
    times = []
    for _ in range(samples):
        _EVICT.sum()
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--cold", action="store_true",
                    help="time each call alone after evicting the CPU caches")
    a = ap.parse_args()

    rows = []
    print(f"{'case':<22} {'call µs':>8} {'capi µs':>8} {'python µs':>10}")
    for label, op, inputs, outs, attrs in cases():
        call = gpukit.call

        def ours(op=op, inputs=inputs, outs=outs, attrs=attrs):
            call(op, inputs, attrs=attrs, out=outs)

        ours()  # fails here, not inside the timing, if the call is refused
        raw = raw_call(op, inputs, outs, attrs)
        raw()
        if a.cold:
            call_ns = cold_call_ns(ours, a.repeats * 10)
            capi_ns = cold_call_ns(raw, a.repeats * 10)
        else:
            call_ns = per_call_ns(ours, a.batch, a.repeats)["median_ns"]
            capi_ns = per_call_ns(raw, a.batch, a.repeats)["median_ns"]
        rows.append({"case": label, "op": op, "attrs": attrs, "call_ns": call_ns,
                     "capi_ns": capi_ns, "python_ns": call_ns - capi_ns})
        print(f"{label:<22} {call_ns / 1e3:8.2f} {capi_ns / 1e3:8.2f} "
              f"{(call_ns - capi_ns) / 1e3:10.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(),
                       "python": platform.python_version(), "library": gpukit.LIBRARY_PATH,
                       "batch": a.batch, "repeats": a.repeats, "cold": a.cold, "rows": rows},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
