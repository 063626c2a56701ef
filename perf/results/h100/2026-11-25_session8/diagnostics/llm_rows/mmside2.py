# Kernels (CUPTI) of each side alone for the LLM M=128/16 rows, harness conditions, shared outputs.
import math, os, statistics, sys, torch, gpukit
sys.path.insert(0, "perf"); import harness
from torch.profiler import profile, ProfilerActivity
for dt in (torch.bfloat16, torch.float16):
  for m in (128, 16):
    n, k = 14336, 4096
    sets = [(torch.randn(m, k, device="cuda").to(dt), torch.randn(k, n, device="cuda").to(dt)) for _ in range(8)]
    outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in sets]
    gi = [[gpukit.from_dlpack(t) for t in s] for s in sets]; go = [gpukit.from_dlpack(o) for o in outs]
    peer = lambda i: torch.matmul(*sets[i % 8], out=outs[i % 8])
    ours = lambda i: gpukit.call("matmul", gi[i % 8], attrs={}, out=[go[i % 8]])
    poison = lambda i: outs[i % 8].fill_(math.nan)
    pm, om = harness.time_calls([peer, ours], [poison, poison], 300)
    ex = gpukit.explain("matmul", gi[0][0], gi[0][1], outputs=[go[0]])
    why = [c["reason"] for c in ex["candidates"] if c["plugin"] == ex["chosen"]]
    print(f"{dt} {m}x{n}x{k}: events torch {pm*1000:.2f} ours {om*1000:.2f} ratio {pm/om:.3f} | {why[0][:170] if why else ''}")
    for label, fn in (("torch", peer), ("ours", ours)):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            harness.time_calls([fn], [poison], 40, warmup=0)
        rows = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA and "reduce_kernel" not in e.name and "spin" not in e.name and "elementwise" not in e.name:
                rows.setdefault(e.name[:90], []).append(e.device_time)
        for kk, v in rows.items(): print(f"   {label:5s} {kk:90s} n={len(v):3d} median {statistics.median(v):6.2f} us")
