"""Host overhead of one gpukit.call on the cpu device, split into Python and C.

    python3 perf/python/bench_call_overhead.py [--json OUT.json] [--batch N] [--repeats N]
                                               [--cold [--blocked]]

Each op runs on tiny inputs ([1, 8]) whose kernel costs next to nothing, with inputs,
outputs and attributes prepared once, as perf/harness.py does (`out=` and `attrs=` given):
what is left is the per-call cost of the binding and of the C dispatch behind it. The last
case gives no `out` (gk_op_call_alloc creates it; the output is dropped, so released, in
the timed call). Columns:

  python    gpukit.call
  capi      lib.gk_op_call(runtime, name, args) through cffi with a gk_op_args built once:
            the C path plus cffi's own call cost, no binding code (for the created-output
            case: gk_op_call_alloc, then gk_tensor_release of the output)
  share     python - capi: the binding's own share

The two run in the same process, alternating: batch by batch, or call by call with
--cold. Per-call numbers are medians over `repeats` batches of `batch` calls
(perf_counter_ns; the JSON also has each minimum). With --cold, each call is timed alone
right after a pass over 32 MiB that evicts the CPU caches, as a call after a wait for the
GPU finds them (perf/harness.py's launch-bound rows synchronize before each call); the
median of `repeats` × 10 such calls; --blocked takes each column's calls one after another
(lower numbers: see cold_call_ns).
Library: $GPUKIT_LIBRARY, else the checkout's build tree (see bindings/python/gpukit/_lib.py).
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
        ("add [1,8] f32, out=None", "add", [x, y], None, {}),
    ]


def raw_call(op, inputs, outs, attrs):
    """A no-Python-work gk_op_call (gk_op_call_alloc + release when `outs` is None): every
    C structure built once, up front."""
    from gpukit._call import _attrs

    given = list(outs) if outs is not None else []
    tensors = ffi.new("gk_tensor*[]", len(inputs) + len(given))
    for i, t in enumerate(list(inputs) + given):
        tensors[i] = t._t
    args = ffi.new("gk_op_args*")
    args.struct_size = ffi.sizeof("gk_op_args")
    args.inputs, args.num_inputs = tensors, len(inputs)
    if given:
        args.outputs, args.num_outputs = tensors + len(inputs), len(given)
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

    if outs is not None:
        return fn
    call_alloc, release, created = lib.gk_op_call_alloc, lib.gk_tensor_release, \
        ffi.new("gk_tensor*[]", 1)

    def fn_alloc(keep=keep, tensors=tensors, name=name):
        if call_alloc(rt, name, args, 1, created, ffi.NULL) != 0:
            raise RuntimeError(gpukit._lib.last_error())
        release(created[0])
    return fn_alloc


_EVICT = np.ones(32 * 1024 * 1024 // 8)


def cold_call_ns(fns, samples: int, blocked: bool = False) -> list:
    """For each of `fns`, the median ns of one call made alone after a pass that evicts the
    CPU caches; the functions take turns, call by call, in a new random order each round
    (the pass does not reset branch predictors, so the call before can matter: in a fixed
    rotation the function after the capi call read ~1 µs slower, whichever it was). With
    `blocked`, each function's calls come one after another instead: then the predictors
    stay trained for the one function, and every column reads lower."""
    import random
    order = random.Random(0)
    rounds = [[i] * samples for i in range(len(fns))] if blocked else \
        [order.sample(range(len(fns)), len(fns)) for _ in range(samples)]
    times = [[] for _ in fns]
    for round_ in rounds:
        for i in round_:
            _EVICT.sum()
            t0 = time.perf_counter_ns()
            fns[i]()
            times[i].append(time.perf_counter_ns() - t0)
    return [statistics.median(t) for t in times]


def warm_call_ns(fns, batch: int, repeats: int) -> list:
    """For each of `fns`, (median, min) over `repeats` batches of the mean ns of `batch`
    calls; the functions take turns, batch by batch. On a loaded machine the minimum is the
    stabler one (a batch the scheduler interrupted reads high)."""
    for fn in fns:
        for _ in range(3 * batch):
            fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter_ns()
            for _ in range(batch):
                fn()
            t.append((time.perf_counter_ns() - t0) / batch)
    return [(statistics.median(t), min(t)) for t in times]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--cold", action="store_true",
                    help="time each call alone after evicting the CPU caches")
    ap.add_argument("--blocked", action="store_true",
                    help="with --cold: each column's calls in one block, not interleaved")
    a = ap.parse_args()

    mode = ("cold, blocked" if a.blocked else "cold, interleaved") if a.cold else "warm"
    print(f"gpukit.call; {mode}")
    rows = []
    print(f"{'case':<26} {'python µs':>9} {'capi µs':>8} {'python share':>12}")
    for label, op, inputs, outs, attrs in cases():
        def timed(call):
            def fn(op=op, inputs=inputs, outs=outs, attrs=attrs):
                call(op, inputs, attrs=attrs, out=outs)
            fn()  # fails here, not inside the timing, if the call is refused
            return fn

        raw = raw_call(op, inputs, outs, attrs)
        raw()
        fns = [timed(gpukit.call), raw]
        if a.cold:
            ns = cold_call_ns(fns, a.repeats * 10, a.blocked)
            low = [None] * len(ns)
        else:
            ns, low = zip(*warm_call_ns(fns, a.batch, a.repeats))
        pure_ns, capi_ns = ns[0], ns[1]
        rows.append({"case": label, "op": op, "attrs": attrs, "out": outs is not None,
                     "python_ns": pure_ns, "capi_ns": capi_ns, "call_ns": pure_ns,
                     "min_ns": {"python": low[0], "capi": low[1]}})

        def us(v):
            return f"{v / 1e3:.2f}" if v is not None else "—"
        print(f"{label:<26} {us(pure_ns):>9} {us(capi_ns):>8} {us(pure_ns - capi_ns):>12}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(),
                       "python": platform.python_version(), "library": gpukit.LIBRARY_PATH,
                       "batch": a.batch, "repeats": a.repeats,
                       "cold": a.cold, "blocked": a.blocked, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
