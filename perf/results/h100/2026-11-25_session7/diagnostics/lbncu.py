# Launch-bound rows under ncu: kernel durations of torch's and GPUkit's op on cold caches.
import sys, torch, gpukit
x = torch.rand(64, 4096, device="cuda").bfloat16(); o = torch.empty_like(x)
gx, go = gpukit.from_dlpack(x), gpukit.from_dlpack(o)
x1 = torch.rand(1, 4096, device="cuda").bfloat16(); o1 = torch.empty_like(x1)
gx1, go1 = gpukit.from_dlpack(x1), gpukit.from_dlpack(o1)
a = torch.rand(64, 4096, device="cuda"); b = torch.rand(64, 4096, device="cuda"); c = torch.empty_like(a)
ga, gb, gc = gpukit.from_dlpack(a), gpukit.from_dlpack(b), gpukit.from_dlpack(c)
cases = [("softmax64", lambda: torch.softmax(x, -1), lambda: gpukit.call("softmax", [gx], attrs={}, out=[go])),
         ("softmax1", lambda: torch.softmax(x1, -1), lambda: gpukit.call("softmax", [gx1], attrs={}, out=[go1])),
         ("add64", lambda: torch.add(a, b, out=c), lambda: gpukit.call("add", [ga, gb], attrs={}, out=[gc]))]
for _ in range(3):
    for n, t, g in cases: t(); g()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for _ in range(5):
    for n, t, g in cases: t(); g()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
