"""Column reductions through gpukit.call against torch: run once with GK_COL_PIN unset and once
set (probe tree .probe/var: the vector column kernel with __launch_bounds__(256, 4))."""
import math, os, sys
sys.path.insert(0, "perf")
import torch
import harness as H
import gpukit
tag = "pin4" if os.environ.get("GK_COL_PIN") else "default"
R = lambda s, d: (torch.rand(s, device="cuda") * 10 - 5).to(d)
for name, dt, shape, ax in [("sum bf16 [4096,16384] axis0", torch.bfloat16, (4096, 16384), 0),
                            ("sum f16 [4096,16384] axis0", torch.float16, (4096, 16384), 0),
                            ("sum f32 [16384,4096] axis0", torch.float32, (16384, 4096), 0)]:
    torch.manual_seed(3)
    x = R(shape, dt)
    out = torch.empty(shape[1], device="cuda", dtype=dt)
    gin, gout = [gpukit.from_dlpack(x)], [gpukit.from_dlpack(out)]
    out.fill_(math.nan)
    gpukit.call("sum", gin, attrs={"axes": [ax]}, out=gout)
    ref = x.double().sum(ax)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    fns = [lambda i: x.sum(ax), lambda i: gpukit.call("sum", gin, attrs={"axes": [ax]}, out=gout)]
    t = H.time_calls(fns, [lambda i: None, lambda i: out.fill_(math.nan)], 150)
    print(f"{tag} {name}: err {err:.1e}; torch {t[0]*1e3:.2f}us ours {t[1]*1e3:.2f}us {t[0]/t[1]:.3f}x", flush=True)
