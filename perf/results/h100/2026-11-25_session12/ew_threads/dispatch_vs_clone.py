"""Where does the dispatch path's add bf16 lose against the same kernel through CuPy? One
process: torch, gpukit.call (HEAD's plugin), CuPy clones at 128 and 768 threads; then the
hold doubled (host gap?), then sizes and swiglu for 128 vs 768."""
import math, sys, os
sys.path.insert(0, ".probe/ew2")
import cupy as cp
import torch
import torch.nn.functional as F
import probe as P
import gpukit

EXTRA = r'''
__device__ __forceinline__ unsigned fadd(unsigned a, unsigned b) { return __float_as_uint(__uint_as_float(a) + __uint_as_float(b)); }
__device__ __forceinline__ uint4 addf4(uint4 x, uint4 y) { uint4 r; r.x = fadd(x.x, y.x); r.y = fadd(x.y, y.y); r.z = fadd(x.z, y.z); r.w = fadd(x.w, y.w); return r; }
__device__ __forceinline__ unsigned swiglu2(unsigned a, unsigned b) {
  __nv_bfloat162 p = *reinterpret_cast<__nv_bfloat162*>(&a), q = *reinterpret_cast<__nv_bfloat162*>(&b);
  float2 f = __bfloat1622float2(p), g = __bfloat1622float2(q);
  __nv_bfloat162 s = __floats2bfloat162_rn(silu1(f.x) * g.x, silu1(f.y) * g.y);
  return *reinterpret_cast<unsigned*>(&s);
}
OP8(swiglu)
'''
BODY = {"add_bf16": "o[i] = add8(a[i], b[i]);", "add_f32": "o[i] = addf4(a[i], b[i]);",
        "silu_bf16": "o[i] = silu8(a[i], a[i]);", "swiglu_bf16": "o[i] = swiglu8(a[i], b[i]);"}
KERN = r'''
extern "C" __global__ void __launch_bounds__({t}) k_{op}_{t}(const uint4* a, const uint4* b, uint4* o, unsigned nvec) {{
  const unsigned i = blockIdx.x * {t}u + threadIdx.x;
  if (i < nvec) {{ {body} }}
}}
'''
src = P.COMMON + EXTRA + "".join(KERN.format(op=op, t=t, body=b) for op, b in BODY.items() for t in (128, 768))
mod = cp.RawModule(code=src, options=("-std=c++17", "--gpu-architecture=sm_90a"))
stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


def case(op, n, with_gk, reps, label=""):
    torch.manual_seed(3)
    dt = torch.float32 if op == "add_f32" else torch.bfloat16
    x = (torch.rand(n, device="cuda") * 10 - 5).to(dt)
    y = (torch.rand(n, device="cuda") * 10 - 5).to(dt)
    out = torch.empty_like(x)
    peer = {"add_bf16": lambda i: x + y, "add_f32": lambda i: x + y, "silu_bf16": lambda i: F.silu(x),
            "swiglu_bf16": lambda i: F.silu(x) * y}[op]
    nvec = n * x.element_size() // 16
    cx, cy, co = (cp.asarray(t.view(torch.int16)) for t in (x, y, out))
    names, fns = ["torch"], [peer]
    if with_gk:
        gop = op.split("_")[0]
        gin = [gpukit.from_dlpack(x)] + ([gpukit.from_dlpack(y)] if gop != "silu" else [])
        gout = [gpukit.from_dlpack(out)]
        names.append("gpukit.call")
        fns.append(lambda i: gpukit.call(gop, gin, out=gout))
    for t in (128, 768):
        k = mod.get_function(f"k_{op}_{t}")
        def f(i, k=k, t=t):
            with stream:
                k(((nvec + t - 1) // t,), (t,), (cx, cy, co, cp.uint32(nvec)))
        names.append(f"cupy {t}")
        fns.append(f)
    ref = peer(0)
    for nm, f in zip(names[1:], fns[1:]):
        out.fill_(math.nan)
        f(0)
        torch.cuda.synchronize()
        tol = 0 if op.startswith("add") else 0.1
        assert (out.float() - ref.float()).abs().max().item() <= tol, (op, nm)
    poison = lambda i: out.fill_(math.nan)
    for rep in range(reps):
        ms = P.time_calls(fns, [lambda i: None] + [poison] * (len(fns) - 1), 250)
        print(f"{op} [{n}]{label} rep {rep}: torch {ms[0] * 1e3:.1f}us; " +
              "; ".join(f"{nm} {m * 1e3:.1f}us {ms[0] / m:.4f}x" for nm, m in zip(names[1:], ms[1:])), flush=True)


for op in ("add_bf16", "silu_bf16", "add_f32"):
    case(op, 1 << 26, True, 2)
P.HOLD_CYCLES = 1_000_000
case("add_bf16", 1 << 26, True, 2, " hold 1M cycles")
P.HOLD_CYCLES = 200_000
for n in (1 << 20, 1 << 22, 1 << 24):
    case("add_bf16", n, False, 2)
case("swiglu_bf16", 1 << 26, True, 2)
