# Which kernel torch.matmul runs for the LLM rows through cuBLAS and through its cuBLASLt path.
import statistics, torch
from torch.profiler import profile, ProfilerActivity
def kernels(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n): fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA: rows.setdefault(e.name[:90], []).append(e.device_time)
    return {k: (len(v), statistics.median(v)) for k, v in rows.items()}
for dt in (torch.bfloat16, torch.float16):
    for (m, n, k) in ((128, 14336, 4096), (16, 14336, 4096), (1024, 1024, 1024)):
        a = torch.randn(m, k, device="cuda").to(dt); b = torch.randn(k, n, device="cuda").to(dt); c = torch.empty(m, n, device="cuda", dtype=dt)
        for lib in ("cublas", "cublaslt"):
            torch.backends.cuda.preferred_blas_library(lib)
            ks = kernels(lambda: torch.matmul(a, b, out=c))
            print(f"{str(dt)[6:]} {m}x{n}x{k} {lib:8s} " + "; ".join(f"{kk} n={v[0]} {v[1]:.2f} us" for kk, v in ks.items()))
