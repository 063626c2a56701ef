"""Elementwise bf16 rows of the harness, with the peer in two forms: as the harness times
it (x + y, a fresh output from torch's allocator, never poisoned) and writing into a given
output that is poisoned like ours (torch.add(out=) / aten.silu.out). Same process, same
time_calls protocol as perf/harness.py (alternating turns, L2 scrub, GPU held)."""
import math
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, "perf")
import harness  # noqa: E402
import gpukit  # noqa: E402

n = 1 << 26
rows = []
for rep in range(3):
    for name in ("add", "silu"):
        g = torch.Generator(device="cuda")
        g.manual_seed(rep)
        xs = [torch.rand(n, device="cuda", generator=g).to(torch.bfloat16) * 4 - 2 for _ in range(2 if name == "add" else 1)]
        out = torch.empty_like(xs[0])
        out2 = torch.empty_like(xs[0])
        gx = [gpukit.from_dlpack(t) for t in xs]
        gout = gpukit.from_dlpack(out)
        if name == "add":
            peer_alloc = lambda i: xs[0] + xs[1]
            peer_out = lambda i: torch.add(xs[0], xs[1], out=out2)
        else:
            peer_alloc = lambda i: F.silu(xs[0])
            peer_out = lambda i: torch.ops.aten.silu.out(xs[0], out=out2)
        ours = lambda i: gpukit.call(name, gx, out=[gout])
        p_ours = lambda i: out.fill_(math.nan)
        p_peer = lambda i: out2.fill_(math.nan)
        none = lambda i: None
        ms = harness.time_calls([peer_alloc, peer_out, ours], [none, p_peer, p_ours], 200)
        torch.cuda.synchronize()
        ref = peer_alloc(0)
        ok = torch.equal(ref, out) and torch.equal(ref, out2)
        print(f"{name} bf16 rep {rep}: torch alloc {ms[0]:.4f} ms, torch out= (poisoned) {ms[1]:.4f} ms, "
              f"ours {ms[2]:.4f} ms | ratio vs alloc {ms[0]/ms[2]:.3f}, vs out= {ms[1]/ms[2]:.3f} | equal {ok}",
              flush=True)
