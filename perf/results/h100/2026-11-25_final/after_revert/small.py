# GPU-only (host hidden) and per-call times of the launch-bound rows, ours against torch.
import statistics, torch, torch.nn.functional as F, gpukit
def timed(fn, hold, n=300):
    for _ in range(10): fn()
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hold: torch.cuda._sleep(200_000)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000)
    return statistics.median(ts)
rows = []
x = torch.rand(1, 4096, device="cuda").bfloat16(); o = torch.empty_like(x)
rows.append(("softmax [1,4096] bf16", lambda: torch.softmax(x, -1), lambda: gpukit.call("softmax", [gpukit.from_dlpack(x)], out=[gpukit.from_dlpack(o)])))
x2 = torch.rand(64, 4096, device="cuda").bfloat16(); o2 = torch.empty_like(x2)
gx2, go2 = gpukit.from_dlpack(x2), gpukit.from_dlpack(o2)
rows.append(("softmax [64,4096] bf16", lambda: torch.softmax(x2, -1), lambda: gpukit.call("softmax", [gx2], out=[go2])))
a = torch.rand(64, 4096, device="cuda"); b = torch.rand(64, 4096, device="cuda"); c = torch.empty_like(a)
ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
rows.append(("add [64,4096] f32", lambda: a + b, lambda: gpukit.call("add", [ga, gb], out=[gc])))
w = torch.rand(4096, device="cuda").bfloat16(); bb = torch.rand(4096, device="cuda").bfloat16()
gw, gbb = gpukit.from_dlpack(w), gpukit.from_dlpack(bb)
rows.append(("layernorm [64,4096] bf16", lambda: F.layer_norm(x2, (4096,), w, bb, 1e-5), lambda: gpukit.call("layernorm", [gx2, gw, gbb], attrs={"eps": 1e-5}, out=[go2])))
print(f"{'row':28s} {'torch gpu':>9s} {'ours gpu':>9s} {'torch call':>10s} {'ours call':>10s}  (µs, medians)")
for name, t, g in rows:
    print(f"{name:28s} {timed(t, True):9.2f} {timed(g, True):9.2f} {timed(t, False):10.2f} {timed(g, False):10.2f}")
