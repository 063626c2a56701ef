#!/usr/bin/env python3
"""GPUkit's side-by-side benchmark harness: every registered benchmark against its peer,
in one process, on the GPU machine.

    python3 perf/harness.py OUT_DIR [--family matmul,reductions] [--quick]

Ours runs the way a user runs it: torch tensors enter GPUkit through DLPack (zero copy)
and the op goes through the C ABI and dispatch (``gpukit.call``), so the plugin that
serves it is whichever dispatch picks; ``GPUKIT_PLUGINS_DISABLE`` forces another one
(``--per-plugin`` re-runs the matmul rows once per CUDA matmul plugin, each in a child
process with the others disabled). The peer is what a user would pick instead: PyTorch
(cuBLAS for matmul). Where the peer takes out= (matmul), it writes into ours' output
buffers, poisoned before its calls too, so both sides write the same memory.

Method, for every row: fresh random inputs (never zeros); ours' output poisoned with NaN
before each timed run and checked fully written; CUDA events around each run on the
stream both sides use (the legacy default stream), warm-up first, the median of many runs,
inputs rotated over sets larger than 3x L2; error of ours and of the peer against a
float64 reference (max and mean absolute, relative Frobenius). Memory-bound rows report
GB/s (each input read once, each output written once) and the fraction of a same-run
device-to-device copy; matrix rows report TFLOP/s.

Writes OUT_DIR/results.json, OUT_DIR/results.md and OUT_DIR/ratios.png; with --baseline DIR,
a full run (every family, not --quick, no plugin disabled) also overwrites DIR/<device>.md,
the curated table the repository keeps (perf/baseline.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F

import gpukit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402  (perf/baseline.py, beside this file)

L2_BYTES = 50 * 2**20
# Rows moving less than this are launch-bound: timed per call as a user sees it (host
# overhead + launch + kernel). Larger rows are timed on the GPU alone (see time_calls).
LAUNCH_BOUND_BYTES = 8 * 2**20
# ... and timed with this many times the runs of the other rows.
LAUNCH_BOUND_RUNS_FACTOR = 10
# Rows timed on the GPU get at least this many milliseconds of timed calls per side (up to
# LAUNCH_BOUND_RUNS_FACTOR times the runs), so a row of a few microseconds rests on hundreds
# of samples rather than 30.
MIN_TIMED_MS = 20.0
# A spin of about 100 µs at H100 clocks queued before each timed call (torch.cuda._sleep):
# the GPU is still busy with it while the host queues the start event, the call and the end
# event, so the interval measured is the GPU's time for the call, not the host's latency.
HOLD_CYCLES = 200_000


@dataclasses.dataclass
class Bench:
    family: str
    name: str        # op and shape, e.g. "softmax [16384, 4096]"
    dtype: torch.dtype
    make: Callable[[], list]            # fresh random inputs (torch, on the GPU)
    peer: Callable[[list], torch.Tensor]
    op: str                             # GPUkit op name
    attrs: dict
    out_like: Callable[[list], list]    # empty torch outputs for ours
    reference: Callable[[list], torch.Tensor]  # float64
    bytes_moved: int = 0                # memory-bound rows
    flops: int = 0                      # matrix rows
    output_index: int = 0               # which of ours' outputs the peer's result matches
    # The peer takes out=: timed, it writes into ours' output buffers (poisoned first, as
    # for ours), so both sides write the same memory and differ only in the call.
    peer_writes_out: bool = False


REGISTRY: list[Bench] = []


def register(b: Bench) -> None:
    REGISTRY.append(b)


def rand(shape, dtype, lo=-1.0, hi=1.0):
    return (torch.rand(shape, device="cuda", dtype=torch.float32) * (hi - lo) + lo).to(dtype)


def nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# ---------------------------------------------------------------------------------------
# The registered benchmarks
# ---------------------------------------------------------------------------------------

def register_matmul(quick: bool) -> None:
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (14336, 4096, 4096),
              (1024, 1024, 1024), (2048, 2048, 2048), (1, 14336, 4096), (16, 14336, 4096),
              (128, 14336, 4096)]
    if quick:
        shapes = [(4096, 4096, 4096), (1, 14336, 4096)]
    cases = [(torch.bfloat16, {}), (torch.float16, {})]
    for dtype, attrs in cases:
        for m, n, k in shapes:
            _matmul_row(m, n, k, dtype, attrs)
    for m, n, k in [(4096, 4096, 4096)] if quick else [(4096, 4096, 4096), (8192, 8192, 8192)]:
        _matmul_row(m, n, k, torch.float32, {"precision": "tf32"})
        _matmul_row(m, n, k, torch.float32, {})


def _matmul_row(m, n, k, dtype, attrs):
    tf32 = attrs.get("precision") == "tf32"
    label = {torch.bfloat16: "bf16", torch.float16: "f16"}.get(dtype, "tf32" if tf32 else "f32")

    def peer(x, out=None, tf32=tf32):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return torch.matmul(x[0], x[1], out=None if out is None else out[0])

    register(Bench("matmul", f"matmul {m}x{n}x{k} {label}", dtype,
                   make=lambda: [rand((m, k), dtype), rand((k, n), dtype)],
                   peer=peer, op="matmul", attrs=dict(attrs),
                   out_like=lambda x: [torch.empty((m, n), device="cuda", dtype=dtype)],
                   reference=lambda x: x[0].double() @ x[1].double(),
                   flops=2 * m * n * k, peer_writes_out=True))


def register_reductions(quick: bool) -> None:
    big = not quick

    def row(name, op, dtype, make, peer, reference, out_like, attrs=None, moved=None, index=0):
        def bytes_of(x):
            return nbytes(*x) + nbytes(*out_like(x))
        sample = None
        if moved is None:
            sample = make()
            moved = bytes_of(sample)
            del sample
        register(Bench("reductions", name, dtype, make, peer, op, attrs or {}, out_like, reference,
                       bytes_moved=moved, output_index=index))

    for dtype in (torch.float32, torch.bfloat16):
        n = 1 << 28 if big and dtype == torch.float32 else 1 << 26
        row(f"sum all [{n}]", "sum", dtype, lambda n=n, d=dtype: [rand((n,), d)],
            lambda x: x[0].sum(), lambda x: x[0].double().sum(),
            lambda x: [torch.empty((), device="cuda", dtype=x[0].dtype)])
    row("sum rows [16384, 4096] f32", "sum", torch.float32,
        lambda: [rand((16384, 4096), torch.float32)], lambda x: x[0].sum(-1),
        lambda x: x[0].double().sum(-1),
        lambda x: [torch.empty((16384,), device="cuda", dtype=torch.float32)], {"axes": [-1]})
    # Column reductions (the reduced axis outermost): a sum over a batch or sequence.
    for shape, dtype in [((16384, 4096), torch.float32), ((4096, 16384), torch.bfloat16)]:
        row(f"sum cols {list(shape)}", "sum", dtype, lambda s=shape, d=dtype: [rand(s, d)],
            lambda x: x[0].sum(0), lambda x: x[0].double().sum(0),
            lambda x: [torch.empty((x[0].shape[1],), device="cuda", dtype=x[0].dtype)],
            {"axes": [0]})
    row("argmax [4096, 32000] f32", "argmax", torch.float32,
        lambda: [rand((4096, 32000), torch.float32)], lambda x: x[0].argmax(-1),
        lambda x: x[0].double().argmax(-1),
        lambda x: [torch.empty((4096,), device="cuda", dtype=torch.int64)], {"axis": -1})
    for dtype, shape in [(torch.bfloat16, (16384, 4096)), (torch.float32, (32768, 1000)),
                         (torch.bfloat16, (1, 4096)), (torch.bfloat16, (64, 4096))]:
        row(f"softmax {list(shape)}", "softmax", dtype,
            lambda s=shape, d=dtype: [rand(s, d, -5, 5)], lambda x: torch.softmax(x[0], -1),
            lambda x: torch.softmax(x[0].double(), -1),
            lambda x: [torch.empty_like(x[0])])
    for shape in [(16384, 4096), (1, 4096), (64, 4096)]:
        h = shape[-1]
        row(f"layernorm {list(shape)}", "layernorm", torch.bfloat16,
            lambda s=shape, h=h: [rand(s, torch.bfloat16), rand((h,), torch.bfloat16),
                                  rand((h,), torch.bfloat16)],
            lambda x: F.layer_norm(x[0], (x[0].shape[-1],), x[1], x[2], 1e-5),
            lambda x: F.layer_norm(x[0].double(), (x[0].shape[-1],), x[1].double(),
                                   x[2].double(), 1e-5),
            lambda x: [torch.empty_like(x[0])], {"eps": 1e-5})
        row(f"rmsnorm {list(shape)}", "rmsnorm", torch.bfloat16,
            lambda s=shape, h=h: [rand(s, torch.bfloat16), rand((h,), torch.bfloat16)],
            lambda x: F.rms_norm(x[0], (x[0].shape[-1],), x[1], 1e-6),
            lambda x: F.rms_norm(x[0].double(), (x[0].shape[-1],), x[1].double(), 1e-6),
            lambda x: [torch.empty_like(x[0])], {"eps": 1e-6})
    row("add_rmsnorm [16384, 4096]", "add_rmsnorm", torch.bfloat16,
        lambda: [rand((16384, 4096), torch.bfloat16), rand((16384, 4096), torch.bfloat16),
                 rand((4096,), torch.bfloat16)],
        lambda x: F.rms_norm(x[0] + x[1], (4096,), x[2], 1e-6),
        lambda x: F.rms_norm((x[0] + x[1]).double(), (4096,), x[2].double(), 1e-6),
        lambda x: [torch.empty_like(x[0]), torch.empty_like(x[0])], {"eps": 1e-6})
    n = 1 << 26
    for dtype in (torch.float32, torch.bfloat16):
        row(f"add [{n}]", "add", dtype, lambda d=dtype: [rand((n,), d), rand((n,), d)],
            lambda x: x[0] + x[1], lambda x: x[0].double() + x[1].double(),
            lambda x: [torch.empty_like(x[0])])
    row(f"silu [{n}] bf16", "silu", torch.bfloat16, lambda: [rand((n,), torch.bfloat16)],
        lambda x: F.silu(x[0]), lambda x: F.silu(x[0].double()), lambda x: [torch.empty_like(x[0])])
    row(f"gelu [{n}] bf16", "gelu", torch.bfloat16, lambda: [rand((n,), torch.bfloat16)],
        lambda x: F.gelu(x[0]), lambda x: F.gelu(x[0].double()), lambda x: [torch.empty_like(x[0])])
    row(f"cast f32->bf16 [{n}]", "cast", torch.float32, lambda: [rand((n,), torch.float32)],
        lambda x: x[0].to(torch.bfloat16), lambda x: x[0].double(),
        lambda x: [torch.empty(x[0].shape, device="cuda", dtype=torch.bfloat16)])
    row("add [64, 4096] f32", "add", torch.float32,
        lambda: [rand((64, 4096), torch.float32), rand((64, 4096), torch.float32)],
        lambda x: x[0] + x[1], lambda x: x[0].double() + x[1].double(),
        lambda x: [torch.empty_like(x[0])])


FAMILIES = {"matmul": register_matmul, "reductions": register_reductions}


# ---------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------

def time_calls(fns, prepares, runs: int, warmup: int = 5, hold: bool = True) -> list:
    """Median milliseconds of each fns[j](i), every call bracketed by CUDA events;
    prepares[j](i) runs outside the events (poisoning, input rotation). Several functions
    take turns call by call (A B, then B A), so a host or GPU whose speed drifts over the
    row slows all alike. With `hold`, the GPU is kept busy (HOLD_CYCLES) while the host
    queues the bracketed call, so host overhead (which differs between GPUkit's and the
    peer's Python layers) is not in the interval; without it, a launch-bound call is
    measured with its host overhead, starting on an idle GPU."""
    for i in range(warmup):
        for fn, prepare in zip(fns, prepares):
            prepare(i)
            fn(i)
    times = [[] for _ in fns]
    for i in range(runs):
        for j in (range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))):
            prepares[j](i)
            # Both sides start from the same cache state: the scrub writes back what prepare
            # left dirty in L2 (ours: the poisoned output, up to 50 MB that would otherwise be
            # written back inside the timed call) and leaves L2 holding clean, unrelated lines.
            scrub_l2()
            if not hold:
                torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if hold:
                torch.cuda._sleep(HOLD_CYCLES)
            start.record()
            fns[j](i)
            end.record()
            end.synchronize()
            times[j].append(start.elapsed_time(end))
    return [statistics.median(t) for t in times]


_scrub = {}


def scrub_l2() -> None:
    """Reads a buffer of twice L2's size (a read-only kernel: it leaves no dirty lines)."""
    if not _scrub:
        _scrub["buf"] = torch.rand(2 * L2_BYTES // 4, device="cuda")
        _scrub["out"] = torch.empty((), device="cuda")
    torch.sum(_scrub["buf"], dim=0, out=_scrub["out"])


def errors(out: torch.Tensor, ref: torch.Tensor) -> dict:
    o, r = out.double().reshape(-1), ref.double().reshape(-1)
    if o.dtype != r.dtype or o.numel() != r.numel():
        return {"max_abs": math.nan, "mean_abs": math.nan, "rel_fro": math.nan}
    d = (o - r).abs()
    denom = r.norm().item()
    return {"max_abs": d.max().item() if d.numel() else 0.0,
            "mean_abs": d.mean().item() if d.numel() else 0.0,
            "rel_fro": (o - r).norm().item() / denom if denom else (o - r).norm().item(),
            "nan": bool(torch.isnan(o).any().item())}


def copy_bandwidth() -> float:
    """Same-run ceiling: GB/s of a 1 GiB device-to-device copy (bytes read + written)."""
    src = torch.rand(2**28, device="cuda")
    dst = torch.empty_like(src)
    ms = time_calls([lambda i: dst.copy_(src)], [lambda i: None], 20)[0]
    return 2 * nbytes(src) / (ms * 1e6)


def run_bench(b: Bench, copy_gbs: float, runs: int) -> dict:
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    # Rotate inputs over sets larger than 3x L2 when one set is smaller.
    sample = b.make()
    per_set = nbytes(*sample)
    sets = [sample] + [b.make() for _ in range(min(7, max(0, math.ceil(3 * L2_BYTES / max(per_set, 1)) - 1)))]
    outs = [b.out_like(x) for x in sets]
    gk_in = [[gpukit.from_dlpack(t) for t in x] for x in sets]
    gk_out = [[gpukit.from_dlpack(t) for t in o] for o in outs]

    def ours(i):
        k = i % len(sets)
        gpukit.call(b.op, gk_in[k], attrs=b.attrs, out=gk_out[k])

    def poison(i):
        for t in outs[i % len(sets)]:
            if t.is_floating_point():
                t.fill_(math.nan)
            else:
                t.fill_(-1)

    # Correctness on a fresh set, poisoned first.
    fresh = b.make()
    fresh_out = b.out_like(fresh)
    for t in fresh_out:
        t.fill_(math.nan) if t.is_floating_point() else t.fill_(-1)
    gpukit.call(b.op, [gpukit.from_dlpack(t) for t in fresh], attrs=b.attrs,
                out=[gpukit.from_dlpack(t) for t in fresh_out])
    torch.cuda.synchronize()
    ref = b.reference(fresh)
    ours_err = errors(fresh_out[b.output_index], ref)
    peer_err = errors(b.peer(fresh), ref)

    launch_bound = 0 < b.bytes_moved < LAUNCH_BOUND_BYTES

    def peer(i):
        k = i % len(sets)
        return b.peer(sets[k], outs[k]) if b.peer_writes_out else b.peer(sets[k])

    peer_prepare = poison if b.peer_writes_out else (lambda i: None)

    # The sides take turns call by call, so a drift of the host's or the GPU's speed over the
    # row (clocks under power and heat, host hours) slows both alike: timed in separate
    # blocks, the same code read anywhere from 0.91x to 1.21x torch from one run to the next
    # (matmul rows from 0.43x to 1.16x). A launch-bound sample carries the host's
    # jitter (scheduling, Python's allocator), so its median needs more samples to settle,
    # and it is timed with its host overhead; larger rows are timed on the GPU alone.
    if launch_bound:
        runs *= LAUNCH_BOUND_RUNS_FACTOR
        peer_ms, ours_ms = time_calls([peer, ours], [peer_prepare, poison], runs, hold=False)
    else:
        estimate_ms = time_calls([peer], [peer_prepare], 5)[0]
        runs = min(runs * LAUNCH_BOUND_RUNS_FACTOR,
                   max(runs, math.ceil(MIN_TIMED_MS / max(estimate_ms, 1e-6))))
        peer_ms, ours_ms = time_calls([peer, ours], [peer_prepare, poison], runs)
    row = {"family": b.family, "name": b.name, "dtype": str(b.dtype).replace("torch.", ""),
           "op": b.op, "attrs": b.attrs, "peer": "torch.matmul (cuBLAS)" if b.family == "matmul" else "PyTorch",
           "peer_ms": peer_ms, "ours_ms": ours_ms, "runs": runs, "ratio": peer_ms / ours_ms, "ours_error": ours_err, "peer_error": peer_err,
           "served_by": served_by(b),
           "timing": "per call, host included, interleaved with the peer" if launch_bound
           else "GPU time, host hidden, interleaved with the peer"}
    if b.flops:
        row["peer_tflops"] = b.flops / (peer_ms * 1e9)
        row["ours_tflops"] = b.flops / (ours_ms * 1e9)
    if b.bytes_moved:
        row["peer_gbs"] = b.bytes_moved / (peer_ms * 1e6)
        row["ours_gbs"] = b.bytes_moved / (ours_ms * 1e6)
        row["ours_copy_fraction"] = row["ours_gbs"] / copy_gbs
    return row


def served_by(b: Bench) -> str:
    x = b.make()
    descs = [gpukit.from_dlpack(t) for t in x]
    outs = [gpukit.from_dlpack(t) for t in b.out_like(x)]
    try:
        return gpukit.explain(b.op, *descs, outputs=outs, **b.attrs).get("chosen") or "none"
    except Exception as e:  # explain is informative only
        return f"? ({e})"


def markdown(rows, meta) -> str:
    lines = [f"# GPUkit vs peers — {meta['device']}, {meta['date']}, commit {meta['commit']}",
             "",
             f"Same-run device-to-device copy: {meta['copy_gbs']:.0f} GB/s. Ratio = peer time / "
             "ours (above 1: ours is faster), medians, ours and the peer taking turns call by "
             "call. Errors: relative Frobenius vs float64. Rows moving "
             f"under {LAUNCH_BOUND_BYTES >> 20} MiB (marked *) are timed per call with host overhead ({LAUNCH_BOUND_RUNS_FACTOR}x the runs); "
             "the others on the GPU alone, with the host's launch latency hidden by a spin "
             f"queued before each timed call, over at least {MIN_TIMED_MS:.0f} ms per side. Before every timed call of either side, L2 is "
             "scrubbed by a read of twice its size (ours: after its output is poisoned).", "",
             "| family | benchmark | dtype | served by | peer ms | ours ms | ratio | ours TFLOP/s or GB/s (% copy) | ours err | peer err | ours max abs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "ours_tflops" in r:
            rate = f"{r['ours_tflops']:.1f} TFLOP/s (peer {r['peer_tflops']:.1f})"
        else:
            rate = f"{r['ours_gbs']:.0f} GB/s ({100 * r['ours_copy_fraction']:.0f}%; peer {r['peer_gbs']:.0f})"
        star = " *" if r.get("timing", "").startswith("per call") else ""
        lines.append(f"| {r['family']} | {r['name']}{star} | {r['dtype']} | {r['served_by']} | {r['peer_ms']:.4f} | "
                     f"{r['ours_ms']:.4f} | {r['ratio']:.3f} | {rate} | "
                     f"{r['ours_error']['rel_fro']:.2e} | {r['peer_error']['rel_fro']:.2e} | "
                     f"{r['ours_error']['max_abs']:.2e} |")
    return "\n".join(lines) + "\n"


def chart(rows, path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(10, max(4, 0.28 * len(rows))))
    names = [f"{r['name']} [{r['served_by']}]" for r in rows]
    ratios = [r["ratio"] for r in rows]
    ax.barh(names, ratios, color=["tab:green" if v >= 1 else "tab:red" for v in ratios])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("peer time / GPUkit time (above 1: GPUkit faster)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--family", default=",".join(FAMILIES))
    ap.add_argument("--quick", action="store_true", help="a few rows per family")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--per-plugin", action="store_true",
                    help="also re-run matmul once per CUDA matmul plugin (child processes)")
    ap.add_argument("--tag", default="dispatch", help="label of this process's rows")
    ap.add_argument("--baseline", metavar="DIR",
                    help="after a full run, overwrite DIR/<device>.md (e.g. perf/baseline)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for fam in args.family.split(","):
        FAMILIES[fam](args.quick)
    meta = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": os.environ.get("GPUKIT_COMMIT", "unknown"), "torch": torch.__version__,
            "gpukit": gpukit.library_version(), "tag": args.tag,
            "plugins_disable": os.environ.get("GPUKIT_PLUGINS_DISABLE", "")}
    meta["copy_gbs"] = copy_bandwidth()
    rows = []
    for i, b in enumerate(REGISTRY):
        t0 = time.time()
        try:
            r = run_bench(b, meta["copy_gbs"], args.runs)
            r["tag"] = args.tag
            rows.append(r)
            print(f"[{i + 1}/{len(REGISTRY)}] {b.name:40s} {r['served_by']:16s} ratio {r['ratio']:.3f} "
                  f"err {r['ours_error']['rel_fro']:.1e} ({time.time() - t0:.1f}s)", flush=True)
        except gpukit.errors.Unimplemented as e:  # a forced plugin declines: not a failure
            print(f"[{i + 1}/{len(REGISTRY)}] {b.name}: declined: {e}", flush=True)
            rows.append({"family": b.family, "name": b.name, "declined": str(e), "tag": args.tag})
        except Exception as e:  # one failing row must not hide the others
            print(f"[{i + 1}/{len(REGISTRY)}] {b.name}: FAILED: {e}", flush=True)
            rows.append({"family": b.family, "name": b.name, "failed": str(e), "tag": args.tag})
        torch.cuda.empty_cache()
    if args.per_plugin:
        plugins = ["matmul_sm90", "cublaslt", "matmul_sm80"]
        for p in plugins:
            env = dict(os.environ, GPUKIT_PLUGINS_DISABLE=",".join(
                [q for q in plugins if q != p] + ["matmul_gemv"]))
            sub = os.path.join(args.out_dir, f"plugin_{p}")
            subprocess.run([sys.executable, __file__, sub, "--family", "matmul", "--runs",
                            str(args.runs), "--tag", p] + (["--quick"] if args.quick else []),
                           env=env, check=False)
            try:
                with open(os.path.join(sub, "results.json")) as f:
                    rows += json.load(f)["rows"]
            except OSError:
                print(f"no results from the {p} child", flush=True)
    good = [r for r in rows if "failed" not in r and "declined" not in r]
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(markdown(good, meta))
        for r in rows:
            if "declined" in r:
                f.write(f"\ndeclined ({r['tag']}): {r['name']}: {r['declined']}\n")
            if "failed" in r:
                f.write(f"\nFAILED: {r['name']}: {r['failed']}\n")
    chart(good, os.path.join(args.out_dir, "ratios.png"))
    if args.baseline:
        full = (set(args.family.split(",")) == set(FAMILIES) and not args.quick
                and not meta["plugins_disable"])
        if full:
            path = baseline.write([{"meta": meta, "rows": rows}], args.baseline)
            print(f"baseline: {path}", flush=True)
        else:
            print("baseline: not written (a partial run: --family, --quick or a plugin disabled)",
                  flush=True)
    return 0 if not any("failed" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
