# matmul f16 1024³ through dispatch (cublaslt) vs torch: kernels launched, and timing in blocks vs interleaved.
import statistics, sys, torch, gpukit
sys.path.insert(0, "perf"); import harness
a = torch.randn(1024, 1024, device="cuda").half(); b = torch.randn(1024, 1024, device="cuda").half()
c = torch.empty(1024, 1024, device="cuda").half()
ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
peer = lambda i: torch.matmul(a, b)
ours = lambda i: gpukit.call("matmul", [ga, gb], attrs={}, out=[gc])
poison = lambda i: c.fill_(float("nan"))
if len(sys.argv) > 1:  # under ncu
    for _ in range(3): peer(0); ours(0)
    torch.cuda.synchronize(); torch.cuda.cudart().cudaProfilerStart()
    for _ in range(3): peer(0); ours(0)
    torch.cuda.synchronize(); torch.cuda.cudart().cudaProfilerStop(); sys.exit()
for r in range(2):
    p_i, o_i = harness.time_calls([peer, ours], [lambda i: None, poison], 200)
    p_b = harness.time_calls([peer], [lambda i: None], 200)[0]
    o_b = harness.time_calls([ours], [poison], 200)[0]
    print(f"interleaved: torch {p_i*1000:.2f} us ours {o_i*1000:.2f} us ratio {p_i/o_i:.3f} | blocks: torch {p_b*1000:.2f} ours {o_b*1000:.2f} ratio {p_b/o_b:.3f}")
