# Kernel names and in-situ durations (CUPTI) of torch.matmul and ours for the small square rows,
# timed as the harness does (rotating sets, L2 scrub, hold).
import math, os, statistics, sys, torch, gpukit
sys.path.insert(0, "perf"); import harness
from torch.profiler import profile, ProfilerActivity
tag = os.environ.get("GPUKIT_CUBLASLT_TUNE", "1")
for dt in (torch.float16, torch.bfloat16):
    for n in (1024, 2048):
        sets = [(torch.randn(n, n, device="cuda").to(dt), torch.randn(n, n, device="cuda").to(dt)) for _ in range(8)]
        outs = [torch.empty(n, n, device="cuda", dtype=dt) for _ in sets]
        gi = [[gpukit.from_dlpack(t) for t in s] for s in sets]; go = [gpukit.from_dlpack(o) for o in outs]
        peer = lambda i: torch.matmul(*sets[i % 8])
        ours = lambda i: gpukit.call("matmul", gi[i % 8], attrs={}, out=[go[i % 8]])
        poison = lambda i: outs[i % 8].fill_(math.nan)
        pm, om = harness.time_calls([peer, ours], [lambda i: None, poison], 60)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            harness.time_calls([peer, ours], [lambda i: None, poison], 30, warmup=0)
        rows = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA and ("gemm" in e.name or "nvjet" in e.name or "cutlass" in e.name or "sm90" in e.name):
                rows.setdefault(e.name[:90], []).append(e.device_time)
        ex = gpukit.explain("matmul", gi[0][0], gi[0][1], outputs=[go[0]])
        why = [c["reason"] for c in ex["candidates"] if c["plugin"] == ex["chosen"]]
        print(f"TUNE={tag} {str(dt)[6:]} {n}: events torch {pm*1000:.2f} us ours {om*1000:.2f} ratio {pm/om:.3f} | {why[0][:150] if why else ''}")
        for k, v in rows.items(): print(f"    {k:90s} n={len(v):3d} median {statistics.median(v):6.2f} us")
