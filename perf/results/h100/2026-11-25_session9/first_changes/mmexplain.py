# Which algorithm the cublaslt plugin keeps for some f16/bf16 rows, after a first call.
import torch, gpukit
for dt in (torch.float16, torch.bfloat16):
    for (m, n, k) in ((1024, 1024, 1024), (128, 14336, 4096), (16, 14336, 4096), (4096, 4096, 4096)):
        a = torch.randn(m, k, device="cuda").to(dt); b = torch.randn(k, n, device="cuda").to(dt); c = torch.empty(m, n, device="cuda").to(dt)
        ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
        gpukit.call("matmul", [ga, gb], attrs={}, out=[gc]); torch.cuda.synchronize()
        e = gpukit.explain("matmul", ga, gb, outputs=[gc])
        cands = [x for x in e.get("candidates", []) if x.get("plugin") == e.get("chosen")]
        print(dt, m, n, k, e.get("chosen"), str(cands)[:400])
