# Launch-bound rows after the harness's L2 scrub: is ours' 1-2 us loss on the host or the GPU?
import math, statistics, sys, time, torch, gpukit
sys.path.insert(0, "perf")
import harness
def run(fns, prepares, mode, n=400):
    for i in range(10):
        for f, p in zip(fns, prepares): p(); f()
    ev = [[] for _ in fns]; host = [[] for _ in fns]
    for i in range(n):
        for j in (range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))):
            prepares[j]()
            if mode != "noscrub": harness.scrub_l2()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if mode == "hold": torch.cuda._sleep(harness.HOLD_CYCLES)
            t0 = time.perf_counter_ns(); s.record(); fns[j](); e.record(); t1 = time.perf_counter_ns()
            e.synchronize()
            ev[j].append(s.elapsed_time(e) * 1000); host[j].append((t1 - t0) / 1000)
    return [statistics.median(t) for t in ev], [statistics.median(t) for t in host]
def steady_host(fn, n=200, reps=15):
    out = []
    for r in range(reps):
        torch.cuda._sleep(50_000_000)
        t0 = time.perf_counter_ns()
        for _ in range(n): fn()
        out.append((time.perf_counter_ns() - t0) / n / 1000)
        torch.cuda.synchronize()
    return statistics.median(out)
cases = []
x = torch.rand(64, 4096, device="cuda").bfloat16(); o = torch.empty_like(x)
gx, go = gpukit.from_dlpack(x), gpukit.from_dlpack(o)
cases.append(("softmax [64,4096] bf16", lambda: torch.softmax(x, -1), lambda: gpukit.call("softmax", [gx], attrs={}, out=[go]), o))
a = torch.rand(64, 4096, device="cuda"); b = torch.rand(64, 4096, device="cuda"); c = torch.empty_like(a)
ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
cases.append(("add [64,4096] f32", lambda: a + b, lambda: gpukit.call("add", [ga, gb], attrs={}, out=[gc]), c))
cases.append(("add out= [64,4096] f32", lambda: torch.add(a, b, out=c), lambda: gpukit.call("add", [ga, gb], attrs={}, out=[gc]), c))
print(f"{'row':24s} {'mode':8s} {'torch us':>8s} {'ours us':>8s} {'ratio':>6s} {'host torch':>10s} {'host ours':>9s}")
for name, t, g, out in cases:
    none = lambda: None
    poison = lambda out=out: out.fill_(math.nan)
    for mode in ["harness", "hold", "noscrub"]:
        (pt, po), (ht, ho) = run([t, g], [none, poison], mode)
        print(f"{name:24s} {mode:8s} {pt:8.2f} {po:8.2f} {pt/po:6.3f} {ht:10.2f} {ho:9.2f}")
    print(f"{name:24s} steady host per call: torch {steady_host(t):.2f} us, ours {steady_host(g):.2f} us")
# Kernel durations in situ (CUPTI, no replay), harness mode.
from torch.profiler import profile, ProfilerActivity
for name, t, g, out in cases[:2]:
    poison = lambda out=out: out.fill_(math.nan)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run([t, g], [lambda: None, poison], "harness", n=100)
    rows = {}
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            rows.setdefault(evt.name[:60], []).append(evt.device_time)
    print(name)
    for k, v in rows.items():
        if len(v) >= 100: print(f"   {k:60s} n={len(v):4d} median {statistics.median(v):7.2f} us")
