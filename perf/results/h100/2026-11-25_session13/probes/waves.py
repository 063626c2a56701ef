"""add bf16 / f16 mul [64 Mi] against torch in one process: the plugin's 768-thread kernel
(one 16-byte vector per operand per thread, 10923 blocks = 41.4 waves of 264) against
(bal) a grid of whole waves (a multiple of 2 blocks per SM), each block a near-equal range,
and (x2) two vectors per thread (20.7 waves). NVRTC through CuPy on torch's stream."""
import math, sys
sys.path.insert(0, ".probe/ew2")
import cupy as cp
import torch
from probe import time_calls, COMMON

SMS = torch.cuda.get_device_properties(0).multi_processor_count
KERN = COMMON + r'''
extern "C" __global__ void __launch_bounds__(768, 2) k1(const uint4* a, const uint4* b, uint4* o, unsigned nvec) {
  const unsigned i = blockIdx.x * 768u + threadIdx.x;
  if (i < nvec) o[i] = add8(a[i], b[i]);
}
extern "C" __global__ void __launch_bounds__(768, 2) kbal(const uint4* a, const uint4* b, uint4* o, unsigned nvec) {
  const unsigned long long g = gridDim.x;
  const unsigned begin = (unsigned)(blockIdx.x * (unsigned long long)nvec / g);
  const unsigned end = (unsigned)((blockIdx.x + 1ull) * nvec / g);
  for (unsigned i = begin + threadIdx.x; i < end; i += 768u) o[i] = add8(a[i], b[i]);
}
extern "C" __global__ void __launch_bounds__(768, 2) k2(const uint4* a, const uint4* b, uint4* o, unsigned nvec) {
  const unsigned i = blockIdx.x * 1536u + threadIdx.x, j = i + 768u;
  uint4 x0, y0, x1, y1;
  if (i < nvec) { x0 = a[i]; y0 = b[i]; }
  if (j < nvec) { x1 = a[j]; y1 = b[j]; }
  if (i < nvec) o[i] = add8(x0, y0);
  if (j < nvec) o[j] = add8(x1, y1);
}
'''
mod = cp.RawModule(code=KERN, options=("-std=c++17", "--gpu-architecture=sm_90a"))
n = 1 << 26
stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
torch.manual_seed(2)
x = (torch.rand(n, device="cuda") * 10 - 5).to(torch.bfloat16)
y = (torch.rand(n, device="cuda") * 10 - 5).to(torch.bfloat16)
out = torch.empty_like(x)
nvec = n // 8
cx, cy, co = (cp.asarray(t.view(torch.int16)) for t in (x, y, out))
waves = -(-nvec // (768 * 2 * SMS))
grids = {"k1": -(-nvec // 768), "kbal": waves * 2 * SMS, "k2": -(-nvec // 1536)}
names, fns = ["torch"], [lambda i: x + y]
for nm, g in grids.items():
    k = mod.get_function(nm)
    def f(i, k=k, g=g):
        with stream:
            k((g,), (768,), (cx, cy, co, cp.uint32(nvec)))
    names.append(f"{nm}({g} blocks)")
    fns.append(f)
ref = x + y
for nm, f in zip(names[1:], fns[1:]):
    out.fill_(math.nan)
    f(0)
    torch.cuda.synchronize()
    assert torch.equal(out, ref), nm
poison = lambda i: out.fill_(math.nan)
print(f"# {torch.cuda.get_device_name()} {SMS} SMs; add bf16 [64 Mi]; ratio = torch / variant")
for rep in range(3):
    ms = time_calls(fns, [lambda i: None] + [poison] * (len(fns) - 1), 300)
    print(f"rep {rep}: torch {ms[0] * 1e3:.2f}us; " + "; ".join(f"{nm}: {m * 1e3:.2f}us {ms[0] / m:.4f}x" for nm, m in zip(names[1:], ms[1:])), flush=True)
