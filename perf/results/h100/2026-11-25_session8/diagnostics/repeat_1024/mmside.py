# Every GPU activity (CUPTI) of torch.matmul alone and of ours alone, f16/bf16 1024^3, harness conditions.
import math, os, statistics, sys, torch, gpukit
sys.path.insert(0, "perf"); import harness
from torch.profiler import profile, ProfilerActivity
tag = os.environ.get("GPUKIT_CUBLASLT_TUNE", "1")
for dt in (torch.float16, torch.bfloat16):
    n = 1024
    sets = [(torch.randn(n, n, device="cuda").to(dt), torch.randn(n, n, device="cuda").to(dt)) for _ in range(8)]
    outs = [torch.empty(n, n, device="cuda", dtype=dt) for _ in sets]
    gi = [[gpukit.from_dlpack(t) for t in s] for s in sets]; go = [gpukit.from_dlpack(o) for o in outs]
    peer = lambda i: torch.matmul(*sets[i % 8])
    ours = lambda i: gpukit.call("matmul", gi[i % 8], attrs={}, out=[go[i % 8]])
    pm, om = harness.time_calls([peer, ours], [lambda i: None, lambda i: None], 200)
    print(f"TUNE={tag} {dt}: events torch {pm*1000:.2f} ours {om*1000:.2f} ratio {pm/om:.3f}")
    for label, fn in (("torch", peer), ("ours", ours)):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            harness.time_calls([fn], [lambda i: None], 40, warmup=0)
        rows = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA and "reduce_kernel" not in e.name:
                rows.setdefault(e.name[:80], []).append(e.device_time)
        for k, v in rows.items(): print(f"   {label:5s} {k:80s} n={len(v):3d} median {statistics.median(v):6.2f} us")
