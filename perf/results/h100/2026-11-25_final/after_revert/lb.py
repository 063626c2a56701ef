# Launch-bound rows: which part of the harness's per-call timing makes ours slower than torch.
import math, statistics, sys, torch, gpukit
sys.path.insert(0, "perf")
import harness
def run(fns, prepares, scrub, n=600):
    for i in range(10):
        for f, p in zip(fns, prepares): p(); f()
    ts = [[] for _ in fns]
    for i in range(n):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))
        for j in order:
            prepares[j]()
            if scrub: harness.scrub_l2()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); fns[j](); e.record(); e.synchronize()
            ts[j].append(s.elapsed_time(e) * 1000)
    return [statistics.median(t) for t in ts]
cases = []
x = torch.rand(64, 4096, device="cuda").bfloat16(); o = torch.empty_like(x)
gx, go = gpukit.from_dlpack(x), gpukit.from_dlpack(o)
cases.append(("softmax [64,4096] bf16", lambda: torch.softmax(x, -1), lambda: gpukit.call("softmax", [gx], attrs={}, out=[go]), o))
x1 = torch.rand(1, 4096, device="cuda").bfloat16(); o1 = torch.empty_like(x1)
gx1, go1 = gpukit.from_dlpack(x1), gpukit.from_dlpack(o1)
cases.append(("softmax [1,4096] bf16", lambda: torch.softmax(x1, -1), lambda: gpukit.call("softmax", [gx1], attrs={}, out=[go1]), o1))
a = torch.rand(64, 4096, device="cuda"); b = torch.rand(64, 4096, device="cuda"); c = torch.empty_like(a)
ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
cases.append(("add [64,4096] f32", lambda: a + b, lambda: gpukit.call("add", [ga, gb], attrs={}, out=[gc]), c))
print(f"{'row':24s} {'variant':22s} {'torch':>7s} {'ours':>7s} {'ratio':>6s}")
for name, t, g, out in cases:
    poison = lambda out=out: out.fill_(math.nan)
    none = lambda: None
    for label, scrub, pz in [("harness (scrub+poison)", True, True), ("scrub, no poison", True, False),
                             ("poison, no scrub", False, True), ("neither", False, False)]:
        pt, po = run([t, g], [none, poison if pz else none], scrub)
        print(f"{name:24s} {label:22s} {pt:7.2f} {po:7.2f} {pt/po:6.3f}")
