# Host time per call right after the harness's scrub + synchronize (cold), and steady:
# torch, gpukit.call, and the bare gk_op_call through cffi (no binding code).
import math, statistics, sys, time, torch, gpukit
sys.path.insert(0, "perf"); sys.path.insert(0, "perf/python")
import harness
from bench_call_overhead import raw_call
x = torch.rand(64, 4096, device="cuda").bfloat16(); o = torch.empty_like(x)
gx, go = gpukit.from_dlpack(x), gpukit.from_dlpack(o)
a = torch.rand(64, 4096, device="cuda"); b = torch.rand(64, 4096, device="cuda"); c = torch.empty_like(a)
ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
cases = {
  "softmax": [("torch", lambda: torch.softmax(x, -1)), ("gpukit.call", lambda: gpukit.call("softmax", [gx], attrs={}, out=[go])), ("capi", raw_call("softmax", [gx], [go], {}))],
  "add": [("torch", lambda: a + b), ("gpukit.call", lambda: gpukit.call("add", [ga, gb], attrs={}, out=[gc])), ("capi", raw_call("add", [ga, gb], [gc], {}))],
}
for name, fns in cases.items():
    for _, f in fns: f()
    for mode in ("cold", "steady"):
        res = {k: [] for k, _ in fns}; ev = {k: [] for k, _ in fns}
        for i in range(300):
            for k, f in (fns if i % 2 == 0 else fns[::-1]):
                if mode == "cold":
                    harness.scrub_l2(); torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); t0 = time.perf_counter_ns(); f(); t1 = time.perf_counter_ns(); e.record(); e.synchronize()
                res[k].append((t1 - t0) / 1000); ev[k].append(s.elapsed_time(e) * 1000)
        print(name, mode, "  ".join(f"{k}: host {statistics.median(res[k]):6.2f} us, events {statistics.median(ev[k]):6.2f} us" for k, _ in fns))
