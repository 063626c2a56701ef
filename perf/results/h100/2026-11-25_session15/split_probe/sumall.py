"""Split-row reductions (sum over all elements, few long rows) and narrowing casts through
gpukit.call against torch in one process. Tag = argv[1]; two passes of 150 interleaved calls
(the harness's time_calls, L2 scrubbed before each call)."""
import math, sys
sys.path.insert(0, "perf")
import torch
import harness as H
import gpukit
tag = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else "all"
R = lambda s, d: (torch.rand(s, device="cuda") * 10 - 5).to(d)
bf, f32, f16 = torch.bfloat16, torch.float32, torch.float16
M = 1 << 20
red = [(bf, (16 * M,), None), (bf, (64 * M,), None), (bf, (256 * M,), None),
       (f32, (16 * M,), None), (f32, (64 * M,), None), (f32, (256 * M,), None),
       (bf, (64, M), [-1]), (f32, (16, 4 * M), [-1])]
casts = [(f32, bf, 64 * M), (f32, f16, 64 * M), (f32, bf, 16 * M)]
if only in ("all", "red"):
  for dt, shape, axes in red:
    torch.manual_seed(3)
    x = R(shape, dt)
    out = torch.empty(() if axes is None else shape[:-1], device="cuda", dtype=dt)
    gin, gout = [gpukit.from_dlpack(x)], [gpukit.from_dlpack(out)]
    attrs = {} if axes is None else {"axes": axes}
    peer = (lambda: x.sum()) if axes is None else (lambda: x.sum(axes))
    out.fill_(math.nan)
    gpukit.call("sum", gin, attrs=attrs, out=gout)
    ref = x.double().sum() if axes is None else x.double().sum(axes)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    fns = [lambda i: peer(), lambda i: gpukit.call("sum", gin, attrs=attrs, out=gout)]
    cells = []
    for p in range(2):
        t = H.time_calls(fns, [lambda i: None, lambda i: out.fill_(math.nan)], 150)
        gbs = x.numel() * x.element_size() / (t[1] * 1e6)
        cells.append(f"{t[0]*1e3:.2f}/{t[1]*1e3:.2f}us {t[0]/t[1]:.3f}x {gbs:.0f}GB/s")
    name = f"sum {str(dt).split('.')[1]} {list(shape)} axes {axes}"
    print(f"{tag:12s} {name:36s} err {err:.1e}; " + "; ".join(cells), flush=True)
if only in ("all", "cast"):
  for src, dst, n in casts:
    torch.manual_seed(3)
    x = R((n,), src)
    out = torch.empty((n,), device="cuda", dtype=dst)
    gin, gout = [gpukit.from_dlpack(x)], [gpukit.from_dlpack(out)]
    out.fill_(math.nan)
    gpukit.call("cast", gin, attrs={}, out=gout)
    err = (out.double() - x.to(dst).double()).abs().max().item()
    fns = [lambda i: x.to(dst), lambda i: gpukit.call("cast", gin, attrs={}, out=gout)]
    cells = []
    for p in range(2):
        t = H.time_calls(fns, [lambda i: None, lambda i: out.fill_(math.nan)], 150)
        gbs = (x.numel() * x.element_size() + out.numel() * out.element_size()) / (t[1] * 1e6)
        cells.append(f"{t[0]*1e3:.2f}/{t[1]*1e3:.2f}us {t[0]/t[1]:.3f}x {gbs:.0f}GB/s")
    name = f"cast {str(src).split('.')[1]}->{str(dst).split('.')[1]} [{n}]"
    print(f"{tag:12s} {name:36s} err {err:.1e}; " + "; ".join(cells), flush=True)
