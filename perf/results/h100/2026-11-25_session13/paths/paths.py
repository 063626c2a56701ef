"""Paths the harness does not time, through gpukit.call against torch in one process: broadcast
and strided elementwise, column and middle-axis reductions, softmax over a non-last axis.
Two passes of 100 interleaved calls each (the harness's time_calls)."""
import math, sys
sys.path.insert(0, "perf")
import torch
import harness as H
import gpukit

tag = sys.argv[1] if len(sys.argv) > 1 else "new"
R = lambda s, d, lo=-5.0, hi=5.0: (torch.rand(s, device="cuda") * (hi - lo) + lo).to(d)
bf, f32 = torch.bfloat16, torch.float32
cases = [
    ("add bf16 [16384,4096]+[4096]", "add", {}, lambda: [R((16384, 4096), bf), R((4096,), bf)],
     lambda x: x[0] + x[1], lambda x: torch.empty_like(x[0])),
    ("mul f32 [16384,4096]*[16384,1]", "mul", {}, lambda: [R((16384, 4096), f32), R((16384, 1), f32)],
     lambda x: x[0] * x[1], lambda x: torch.empty_like(x[0])),
    ("add bf16 [8192,8192]^T+[8192,8192]", "add", {}, lambda: [R((8192, 8192), bf).t(), R((8192, 8192), bf)],
     lambda x: x[0] + x[1], lambda x: torch.empty((8192, 8192), device="cuda", dtype=bf)),
    ("silu bf16 [8192,8192]^T", "silu", {}, lambda: [R((8192, 8192), bf).t()],
     lambda x: torch.nn.functional.silu(x[0]), lambda x: torch.empty((8192, 8192), device="cuda", dtype=bf)),
    ("sum f32 [16384,4096] axis0", "sum", {"axes": [0]}, lambda: [R((16384, 4096), f32)],
     lambda x: x[0].sum(0), lambda x: torch.empty(4096, device="cuda")),
    ("sum bf16 [4096,16384] axis0", "sum", {"axes": [0]}, lambda: [R((4096, 16384), bf)],
     lambda x: x[0].sum(0), lambda x: torch.empty(16384, device="cuda", dtype=bf)),
    ("max f32 [64,4096,64] axis1", "max", {"axes": [1]}, lambda: [R((64, 4096, 64), f32)],
     lambda x: x[0].amax(1), lambda x: torch.empty((64, 64), device="cuda")),
    ("softmax f32 [4096,4096] axis0", "softmax", {"axis": 0}, lambda: [R((4096, 4096), f32)],
     lambda x: torch.softmax(x[0], 0), lambda x: torch.empty_like(x[0])),
    ("layernorm bf16 [4096,4096]^T rows", "layernorm", {"eps": 1e-5},
     lambda: [R((4096, 4096), bf).t(), R((4096,), bf), R((4096,), bf)],
     lambda x: torch.nn.functional.layer_norm(x[0], (4096,), x[1], x[2], 1e-5),
     lambda x: torch.empty((4096, 4096), device="cuda", dtype=bf)),
]
for name, op, attrs, make, peer, out_like in cases:
    torch.manual_seed(7)
    x = make()
    out = out_like(x)
    gin, gout = [gpukit.from_dlpack(t) for t in x], [gpukit.from_dlpack(out)]
    ref = peer([t.double() for t in x])
    out.fill_(math.nan)
    try:
        gpukit.call(op, gin, attrs=attrs, out=gout)
    except Exception as e:  # report and go on: a path that is refused is a finding too
        print(f"{tag} {name}: gpukit.call failed: {e}", flush=True)
        continue
    torch.cuda.synchronize()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    poison = lambda i: out.fill_(math.nan)
    fns = [lambda i: peer(x), lambda i: gpukit.call(op, gin, attrs=attrs, out=gout)]
    moved = sum(t.numel() * t.element_size() for t in x) + out.numel() * out.element_size()
    cells = []
    for p in range(2):
        t = H.time_calls(fns, [lambda i: None, poison], 100)
        cells.append(f"torch {t[0] * 1e3:.2f}us ours {t[1] * 1e3:.2f}us {t[0] / t[1]:.3f}x ({moved / t[1] / 1e6:.0f} GB/s)")
    print(f"{tag} {name}: rel err {err:.1e}; " + "; ".join(cells), flush=True)
