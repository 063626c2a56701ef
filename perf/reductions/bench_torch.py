#!/usr/bin/env python3
"""Side-by-side benchmark: GPUkit reductions kernels vs PyTorch, in one process.

Our kernels are called through a small ctypes library built from
perf/reductions/capi.cu (the plugin needs the GPUkit runtime; this does not):

    nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \
      -I kernels perf/reductions/capi.cu kernels/reductions/*.cu -o /tmp/libgkred.so

Run:

    python3 perf/reductions/bench_torch.py --lib /tmp/libgkred.so OUT.json [--md OUT.md]

For every case: fresh random inputs, poisoned (NaN) outputs, error of ours and of
torch against a float64 torch reference (‖out − ref‖ / ‖ref‖), a bit-identity check of
two runs of ours, then timing of both with torch.cuda.Event (warm-up, median of many
runs, inputs rotated over more than 3× L2). Bandwidth counts each input read once and
each output written once. A device-to-device copy gives the ceiling in the same run.
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

MAX_DIMS = 8
DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3, torch.int64: 4}
UNARY = {"neg": 0, "abs": 1, "exp": 2, "log": 3, "sqrt": 4, "rsqrt": 5, "tanh": 6, "sigmoid": 7,
         "relu": 8, "gelu": 9, "gelu_tanh": 10, "silu": 11}
BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "maximum": 4, "minimum": 5, "pow": 6,
          "swiglu": 7, "geglu": 8, "geglu_tanh": 9}
REDUCE = {"sum": 0, "mean": 1, "prod": 2, "max": 3, "min": 4, "argmax": 5, "argmin": 6}


class TensorRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


_REF_CACHE = {}


def ref_of(t):
    """TensorRef for a torch tensor; cached so launch-bound timings measure the kernel
    launch rather than ctypes struct building."""
    if t is None:
        return None
    key = (t.data_ptr(), t.dtype, tuple(t.shape), t.stride())
    r = _REF_CACHE.get(key)
    if r is not None:
        return r
    r = TensorRef()
    r.data = t.data_ptr()
    r.dtype = DTYPE_CODE[t.dtype]
    r.ndim = t.dim()
    for d in range(t.dim()):
        r.shape[d] = t.shape[d]
        r.strides[d] = t.stride(d)
    if len(_REF_CACHE) > 4096:
        _REF_CACHE.clear()
    _REF_CACHE[key] = r
    return r


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        P = ctypes.POINTER(TensorRef)
        L = self.lib
        for name, args in {
            "gkr_unary": [ctypes.c_int, P, P, ctypes.c_void_p],
            "gkr_binary": [ctypes.c_int, P, P, P, ctypes.c_void_p],
            "gkr_cast": [P, P, ctypes.c_void_p],
            "gkr_reduce": [ctypes.c_int, P, ctypes.c_uint, P, ctypes.c_void_p, ctypes.c_void_p],
            "gkr_softmax": [P, ctypes.c_int, ctypes.c_int, P, ctypes.c_void_p, ctypes.c_void_p],
            "gkr_norm": [P, P, P, P, P, P, ctypes.c_float, ctypes.c_int, ctypes.c_void_p,
                         ctypes.c_void_p],
        }.items():
            getattr(L, name).argtypes = args
            getattr(L, name).restype = ctypes.c_int
        L.gkr_reduce_workspace.argtypes = [ctypes.c_int, P, ctypes.c_uint, P]
        L.gkr_reduce_workspace.restype = ctypes.c_ulonglong
        L.gkr_softmax_workspace.argtypes = [P, ctypes.c_int, P]
        L.gkr_softmax_workspace.restype = ctypes.c_ulonglong
        L.gkr_norm_workspace.argtypes = [P, P, P, P, P, P, ctypes.c_float, ctypes.c_int]
        L.gkr_norm_workspace.restype = ctypes.c_ulonglong
        self.ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        self.ws_ptr = self.ws.data_ptr()

    @staticmethod
    def _p(r):
        return ctypes.byref(r) if r is not None else None

    @staticmethod
    def _check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: cudaError {rc}")

    def stream(self):
        return torch.cuda.current_stream().cuda_stream

    def unary(self, op, x, out):
        self._check(self.lib.gkr_unary(UNARY[op], ref_of(x), ref_of(out), self.stream()), op)

    def binary(self, op, a, b, out):
        self._check(self.lib.gkr_binary(BINARY[op], ref_of(a), ref_of(b), ref_of(out), self.stream()), op)

    def cast(self, x, out):
        self._check(self.lib.gkr_cast(ref_of(x), ref_of(out), self.stream()), "cast")

    def reduce(self, op, x, dims, out):
        mask = 0
        for d in dims:
            mask |= 1 << (d % x.dim())
        rx, ro = ref_of(x), ref_of(out)
        need = self.lib.gkr_reduce_workspace(REDUCE[op], rx, mask, ro)
        assert need <= self.ws.numel()
        self._check(self.lib.gkr_reduce(REDUCE[op], rx, mask, ro, self.ws_ptr,
                                        self.stream()), op)

    def softmax(self, x, axis, log, out):
        rx, ro = ref_of(x), ref_of(out)
        assert self.lib.gkr_softmax_workspace(rx, axis % x.dim(), ro) <= self.ws.numel()
        self._check(self.lib.gkr_softmax(rx, axis % x.dim(), int(log), ro,
                                         self.ws_ptr, self.stream()), "softmax")

    def norm(self, x, res, w, b, out, s, eps, rms):
        refs = [ref_of(t) for t in (x, res, w, b, out, s)]
        ptrs = [self._p(r) for r in refs]
        assert self.lib.gkr_norm_workspace(*ptrs, eps, int(rms)) <= self.ws.numel()
        self._check(self.lib.gkr_norm(*ptrs, eps, int(rms), self.ws_ptr,
                                      self.stream()), "norm")


def median_ms(fn, sets, iters, warmup=5):
    for i in range(warmup):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        s = sets[i % len(sets)]
        starts[i].record()
        fn(s)
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def host_us_per_call(fn, s, n=500):
    """Launch-bound cost: wall time per call of n back-to-back calls, then a sync."""
    for _ in range(20):
        fn(s)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn(s)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def rel_err(out, ref):
    out = out.double()
    ref = ref.double()
    nan_mismatch = bool((torch.isnan(out) != torch.isnan(ref)).any())
    fin = torch.isfinite(ref) & torch.isfinite(out)
    inf_mismatch = bool(((~torch.isfinite(ref)) & (out != ref) & ~torch.isnan(ref)).any())
    num = torch.linalg.vector_norm((out - ref)[fin])
    den = torch.linalg.vector_norm(ref[fin])
    err = float(num / den) if den > 0 else float(num)
    return float("inf") if (nan_mismatch or inf_mismatch) else err


class Case:
    """name, make() -> dict of inputs, ours(inputs) -> outputs (list), torch_fn(inputs) ->
    outputs (list), ref(inputs) -> float64 outputs (list), bytes moved."""

    def __init__(self, name, make, ours, torch_fn, ref, nbytes, small=False):
        self.name, self.make, self.ours, self.torch_fn, self.ref = name, make, ours, torch_fn, ref
        self.nbytes, self.small = nbytes, small


def cases(lib):
    C = []
    dev = "cuda"

    def rnd(shape, dt, mean=0.0, sd=1.0):
        return (torch.randn(shape, device=dev, dtype=torch.float32) * sd + mean).to(dt)

    def poison(shape, dt):
        if dt.is_floating_point:
            return torch.full(shape, float("nan"), device=dev, dtype=dt)
        return torch.full(shape, -1, device=dev, dtype=dt)

    def esize(dt):
        return torch.empty((), dtype=dt).element_size()

    def numel(shape):
        n = 1
        for s in shape:
            n *= s
        return n

    # softmax / log_softmax
    for shape, dt, log, small in [((16384, 4096), torch.bfloat16, False, False),
                                  ((32768, 1000), torch.float32, False, False),
                                  ((4096, 32000), torch.float16, False, False),
                                  ((32, 262144), torch.float32, True, False),
                                  ((8, 128), torch.float32, False, True),
                                  ((64, 1024), torch.bfloat16, True, True)]:
        def make(shape=shape, dt=dt):
            return {"x": rnd(shape, dt, sd=3.0), "out": poison(shape, dt)}

        def ours(i, log=log):
            lib.softmax(i["x"], -1, log, i["out"])
            return [i["out"]]

        def tfn(i, log=log):
            return [(F.log_softmax if log else F.softmax)(i["x"], dim=-1)]

        def ref(i, log=log):
            return [(F.log_softmax if log else F.softmax)(i["x"].double(), dim=-1)]

        C.append(Case(f"{'log_softmax' if log else 'softmax'} {str(dt)[6:]} {list(shape)}", make, ours,
                      tfn, ref, 2 * numel(shape) * esize(dt), small))

    # norms
    for kind in ["layernorm", "rmsnorm", "add_rmsnorm", "add_layernorm"]:
        for shape, dt, small in [((16384, 4096), torch.bfloat16, False), ((8192, 1024), torch.float32, False),
                                 ((64, 262144), torch.bfloat16, False), ((4, 768), torch.bfloat16, True)]:
            rms, add = "rms" in kind, kind.startswith("add_")
            h = shape[-1]

            def make(shape=shape, dt=dt, add=add, rms=rms, h=h):
                d = {"x": rnd(shape, dt, mean=1.0, sd=2.0), "w": rnd((h,), dt, 1.0, 0.2),
                     "b": None if rms else rnd((h,), dt, 0.0, 0.5), "out": poison(shape, dt)}
                d["r"] = rnd(shape, dt) if add else None
                d["s"] = poison(shape, dt) if add else None
                return d

            def ours(i, rms=rms, add=add):
                lib.norm(i["x"], i["r"], i["w"], i["b"], i["out"], i["s"], 1e-5, rms)
                return [i["out"]] + ([i["s"]] if add else [])

            def tfn(i, rms=rms, add=add, h=h):
                x = i["x"] + i["r"] if add else i["x"]
                y = F.rms_norm(x, (h,), i["w"], 1e-5) if rms else F.layer_norm(x, (h,), i["w"], i["b"], 1e-5)
                return [y] + ([x] if add else [])

            def ref(i, rms=rms, add=add, h=h):
                x = (i["x"] + i["r"]).double() if add else i["x"].double()
                w = i["w"].double()
                if rms:
                    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
                else:
                    y = F.layer_norm(x, (h,), w, i["b"].double(), 1e-5)
                return [y] + ([x] if add else [])

            moved = (4 if add else 2) * numel(shape) * esize(dt)
            C.append(Case(f"{kind} {str(dt)[6:]} {list(shape)}", make, ours, tfn, ref, moved, small))

    # reductions
    for op, shape, dims, dt, small in [("sum", (1 << 28,), (0,), torch.float32, False),
                                       ("sum", (1 << 28,), (0,), torch.bfloat16, False),
                                       ("sum", (16384, 4096), (1,), torch.float32, False),
                                       ("sum", (16384, 4096), (0,), torch.float32, False),
                                       ("mean", (4096, 16384), (0,), torch.bfloat16, False),
                                       ("max", (65536, 1024), (1,), torch.bfloat16, False),
                                       ("argmax", (4096, 32000), (1,), torch.float32, False),
                                       ("sum", (64, 1 << 20), (1,), torch.float32, False),
                                       ("sum", (1000,), (0,), torch.float32, True),
                                       ("max", (32, 512), (1,), torch.float16, True)]:
        def make(shape=shape, dt=dt, dims=dims, op=op):
            x = rnd(shape, dt)
            oshape = [s for d, s in enumerate(shape) if d not in dims]
            odt = torch.int64 if op.startswith("arg") else dt
            return {"x": x, "out": poison(oshape, odt)}

        def ours(i, op=op, dims=dims):
            lib.reduce(op, i["x"], dims, i["out"])
            return [i["out"]]

        def tfn(i, op=op, dims=dims):
            x = i["x"]
            if op == "sum":
                return [x.sum(dim=dims)]
            if op == "mean":
                return [x.mean(dim=dims)]
            if op == "max":
                return [x.amax(dim=dims)]
            return [x.argmax(dim=dims[0])]

        def ref(i, op=op, dims=dims):
            x = i["x"].double()
            if op == "sum":
                return [x.sum(dim=dims)]
            if op == "mean":
                return [x.mean(dim=dims)]
            if op == "max":
                return [x.amax(dim=dims)]
            return [x.argmax(dim=dims[0]).double()]

        C.append(Case(f"{op} {str(dt)[6:]} {list(shape)} dims={list(dims)}", make, ours, tfn, ref,
                      numel(shape) * esize(dt), small))

    # elementwise
    for op, shape, bshape, dt, small in [("add", (1 << 26,), (1 << 26,), torch.float32, False),
                                         ("add", (16384, 8192), (8192,), torch.bfloat16, False),
                                         ("mul", (16384, 8192), (16384, 8192), torch.bfloat16, False),
                                         ("swiglu", (8192, 8192), (8192, 8192), torch.bfloat16, False),
                                         ("add", (4096,), (4096,), torch.float32, True)]:
        def make(shape=shape, bshape=bshape, dt=dt):
            return {"a": rnd(shape, dt), "b": rnd(bshape, dt), "out": poison(shape, dt)}

        def ours(i, op=op):
            lib.binary(op, i["a"], i["b"], i["out"])
            return [i["out"]]

        def tfn(i, op=op):
            if op == "swiglu":
                return [F.silu(i["a"]) * i["b"]]
            return [getattr(torch, op)(i["a"], i["b"])]

        def ref(i, op=op):
            a, b = i["a"].double(), i["b"].double()
            if op == "swiglu":
                return [F.silu(a) * b]
            return [getattr(torch, op)(a, b)]

        moved = (2 * numel(shape) + numel(bshape)) * esize(dt)
        C.append(Case(f"{op} {str(dt)[6:]} {list(shape)}+{list(bshape)}", make, ours, tfn, ref, moved, small))

    for op, shape, dt, small in [("gelu", (1 << 27,), torch.bfloat16, False), ("silu", (1 << 26,), torch.float32, False),
                                 ("exp", (1 << 26,), torch.float16, False), ("gelu", (2048,), torch.bfloat16, True)]:
        def make(shape=shape, dt=dt):
            return {"x": rnd(shape, dt), "out": poison(shape, dt)}

        def ours(i, op=op):
            lib.unary(op, i["x"], i["out"])
            return [i["out"]]

        def tfn(i, op=op):
            return [getattr(F, op)(i["x"]) if op in ("gelu", "silu") else torch.exp(i["x"])]

        def ref(i, op=op):
            x = i["x"].double()
            return [getattr(F, op)(x) if op in ("gelu", "silu") else torch.exp(x)]

        C.append(Case(f"{op} {str(dt)[6:]} {list(shape)}", make, ours, tfn, ref, 2 * numel(shape) * esize(dt), small))

    for shape, src, dst in [((1 << 27,), torch.float32, torch.bfloat16), ((1 << 27,), torch.bfloat16, torch.float32)]:
        def make(shape=shape, src=src, dst=dst):
            return {"x": rnd(shape, src), "out": poison(shape, dst)}

        def ours(i):
            lib.cast(i["x"], i["out"])
            return [i["out"]]

        def tfn(i, dst=dst):
            return [i["x"].to(dst)]

        def ref(i, dst=dst):
            return [i["x"].to(dst).double()]

        C.append(Case(f"cast {str(src)[6:]}->{str(dst)[6:]} {list(shape)}", make, ours, tfn, ref,
                      numel(shape) * (esize(src) + esize(dst))))
    return C


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_json")
    ap.add_argument("--md", help="markdown table path (default: OUT_JSON with .md)")
    ap.add_argument("--lib", default="/tmp/libgkred.so")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    lib = Lib(args.lib)
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)

    # copy ceiling, read + write bytes
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = median_ms(lambda s: dst.copy_(src), [None], 20)
    copy_gbs = 2 * src.numel() / (copy_ms * 1e-3) / 1e9
    del src, dst
    rows = []
    print(f"device {props.name}; copy {copy_gbs:.0f} GB/s; torch {torch.__version__}")
    print(f"{'case':52s} {'ours us':>9s} {'torch us':>9s} {'ours GB/s':>9s} {'torch GB/s':>10s} "
          f"{'%copy':>6s} {'err ours':>9s} {'err torch':>9s} det")
    for case in cases(lib):
        if args.filter and args.filter not in case.name:
            continue
        torch.manual_seed(int(time.time_ns() % (1 << 31)))
        first = case.make()
        outs = [o.clone() for o in case.ours(first)]
        for k in ("out", "s"):  # re-poison and run again: must be bit-identical
            if first.get(k) is not None and first[k].is_floating_point():
                first[k].fill_(float("nan"))
        outs2 = case.ours(first)
        det = all(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
                  for a, b in zip(outs, outs2))
        refs = case.ref(first)
        tos = case.torch_fn(first)
        err_ours = max(rel_err(o, r) for o, r in zip(outs, refs))
        err_torch = max(rel_err(o, r) for o, r in zip(tos, refs))
        del outs, outs2, refs, tos
        nsets = 1 if case.small else max(1, min(8, (3 * l2) // max(case.nbytes, 1) + 1))
        sets = [first] + [case.make() for _ in range(nsets - 1)]
        t_ours = median_ms(case.ours, sets, args.iters) * 1e3
        t_torch = median_ms(case.torch_fn, sets, args.iters) * 1e3
        row = {"case": case.name, "ours_us": t_ours, "torch_us": t_torch,
               "ours_gbs": case.nbytes / (t_ours * 1e-6) / 1e9, "torch_gbs": case.nbytes / (t_torch * 1e-6) / 1e9,
               "copy_gbs": copy_gbs, "err_ours": err_ours, "err_torch": err_torch, "deterministic": det,
               "small": case.small}
        if case.small:
            row["ours_host_us_per_call"] = host_us_per_call(case.ours, first)
            row["torch_host_us_per_call"] = host_us_per_call(case.torch_fn, first)
        rows.append(row)
        print(f"{case.name:52s} {t_ours:9.1f} {t_torch:9.1f} {row['ours_gbs']:9.0f} {row['torch_gbs']:10.0f} "
              f"{100 * row['ours_gbs'] / copy_gbs:5.1f}% {err_ours:9.1e} {err_torch:9.1e} {'yes' if det else 'NO'}"
              + (f"  host/call ours {row['ours_host_us_per_call']:.1f} torch {row['torch_host_us_per_call']:.1f} us"
                 if case.small else ""), flush=True)
        del sets, first
        torch.cuda.empty_cache()

    with open(args.out_json, "w") as f:
        json.dump({"device": props.name, "torch": torch.__version__, "copy_gbs": copy_gbs, "rows": rows}, f, indent=1)
    md = args.md or (args.out_json.rsplit(".", 1)[0] + ".md")
    with open(md, "w") as f:
        f.write(f"Device: {props.name}; copy {copy_gbs:.0f} GB/s; torch {torch.__version__}\n\n")
        f.write("| case | ours µs | torch µs | ours GB/s | torch GB/s | ours % copy | err ours | err torch | bit-identical |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
        for r in rows:
            f.write(f"| {r['case']} | {r['ours_us']:.1f} | {r['torch_us']:.1f} | {r['ours_gbs']:.0f} | "
                    f"{r['torch_gbs']:.0f} | {100 * r['ours_gbs'] / copy_gbs:.1f}% | {r['err_ours']:.1e} | "
                    f"{r['err_torch']:.1e} | {'yes' if r['deterministic'] else 'NO'} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
