"""Softmax and row reductions through gpukit.call against torch in one process, in passes of
100 interleaved calls (the harness's time_calls), to show whether every other pass runs slower
(the kernel-parameter-size effect of session 12). Run once per build (base / new)."""
import math, sys
sys.path.insert(0, "perf")
import torch
import harness as H
import gpukit

tag = sys.argv[1]
R = lambda s, d, lo=-5.0, hi=5.0: (torch.rand(s, device="cuda") * (hi - lo) + lo).to(d)
cases = [
    ("softmax f32 [32768,1000]", "softmax", {}, lambda: [R((32768, 1000), torch.float32)],
     lambda x: torch.softmax(x[0], -1), lambda x: torch.empty_like(x[0])),
    ("softmax f32 [2048,1000]", "softmax", {}, lambda: [R((2048, 1000), torch.float32)],
     lambda x: torch.softmax(x[0], -1), lambda x: torch.empty_like(x[0])),
    ("softmax bf16 [2048,4096]", "softmax", {}, lambda: [R((2048, 4096), torch.bfloat16)],
     lambda x: torch.softmax(x[0], -1), lambda x: torch.empty_like(x[0])),
    ("sum rows f32 [16384,4096]", "sum", {"axes": [-1]}, lambda: [R((16384, 4096), torch.float32)],
     lambda x: x[0].sum(-1), lambda x: torch.empty(x[0].shape[0], device="cuda")),
    ("sum rows f32 [2048,4096]", "sum", {"axes": [-1]}, lambda: [R((2048, 4096), torch.float32)],
     lambda x: x[0].sum(-1), lambda x: torch.empty(x[0].shape[0], device="cuda")),
    ("argmax f32 [4096,32000]", "argmax", {"axis": -1}, lambda: [R((4096, 32000), torch.float32)],
     lambda x: x[0].argmax(-1), lambda x: torch.empty(x[0].shape[0], device="cuda", dtype=torch.int64)),
    ("sum all f32 [16 Mi]", "sum", {}, lambda: [R((1 << 24,), torch.float32)],
     lambda x: x[0].sum(), lambda x: torch.empty((), device="cuda")),
]
for name, op, attrs, make, peer, out_like in cases:
    torch.manual_seed(7)
    x = make()
    out = out_like(x)
    gin, gout = [gpukit.from_dlpack(t) for t in x], [gpukit.from_dlpack(out)]
    ref = peer(x)
    if out.dtype.is_floating_point:
        out.fill_(math.nan)
    gpukit.call(op, gin, attrs=attrs, out=gout)
    torch.cuda.synchronize()
    if out.dtype.is_floating_point:
        err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
        assert err < 1e-2, (name, err)
    else:
        assert torch.equal(out, ref), name
    poison = (lambda i: out.fill_(math.nan)) if out.dtype.is_floating_point else (lambda i: out.fill_(-1))
    fns = [lambda i: peer(x), lambda i: gpukit.call(op, gin, attrs=attrs, out=gout)]
    cells = []
    for p in range(4):
        t = H.time_calls(fns, [lambda i: None, poison], 100)
        cells.append(f"{t[0] * 1e3:.2f}/{t[1] * 1e3:.2f}us {t[0] / t[1]:.4f}x")
    print(f"{tag} {name}: " + "; ".join(cells), flush=True)
