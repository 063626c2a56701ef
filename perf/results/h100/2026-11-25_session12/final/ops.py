"""Elementwise ops through gpukit.call against torch in one process, [64 Mi] (and add bf16 at
4 Mi / 16 Mi), the harness's time_calls; run once per build (base / new) in alternation."""
import math, sys
sys.path.insert(0, "perf")
import torch
import torch.nn.functional as F
import harness as H
import gpukit

tag = sys.argv[1]
n = 1 << 26
cases = [("add", torch.bfloat16, n, lambda a, b: a + b), ("mul", torch.float16, n, lambda a, b: a * b),
         ("add", torch.float32, n, lambda a, b: a + b), ("swiglu", torch.bfloat16, n, lambda a, b: F.silu(a) * b),
         ("geglu", torch.bfloat16, n, lambda a, b: F.gelu(a) * b), ("silu", torch.bfloat16, n, lambda a, b: F.silu(a)),
         ("add", torch.bfloat16, 1 << 22, lambda a, b: a + b), ("add", torch.bfloat16, 1 << 24, lambda a, b: a + b)]
for op, dt, m, peer in cases:
    torch.manual_seed(5)
    a = (torch.rand(m, device="cuda") * 10 - 5).to(dt)
    b = (torch.rand(m, device="cuda") * 10 - 5).to(dt)
    out = torch.empty_like(a)
    gin = [gpukit.from_dlpack(a)] + ([gpukit.from_dlpack(b)] if op != "silu" else [])
    gout = [gpukit.from_dlpack(out)]
    ref = peer(a.double(), b.double())
    out.fill_(math.nan)
    gpukit.call(op, gin, out=gout)
    torch.cuda.synchronize()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-2, (op, err)
    fns = [lambda i: peer(a, b), lambda i: gpukit.call(op, gin, out=gout)]
    preps = [lambda i: None, lambda i: out.fill_(math.nan)]
    t = [H.time_calls(fns, preps, 200) for _ in range(2)]
    print(f"{tag} {op} {str(dt)[6:]} [{m}]: " + "; ".join(f"torch {p * 1e3:.1f}us ours {o * 1e3:.1f}us {p / o:.4f}x" for p, o in t), flush=True)
