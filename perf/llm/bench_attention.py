"""GPUkit's attention op beside torch.nn.functional.scaled_dot_product_attention, in one
process on one GPU (docs/kernels/llm.md, "Attention against PyTorch").

  python perf/llm/bench_attention.py [--json out.json] [--iters 20]

Per case: fresh random q, k, v (normal, bf16 or f16), GPUkit's output poisoned (NaN) before
every timed call; both sides on the same stream (torch's current stream, wrapped for GPUkit),
timed with CUDA events after warm-up, the median of `iters` runs; error of each side against
a float64 reference on the first sequence and head group (‖out − ref‖ / ‖ref‖). torch runs
its best backend for the shape (flash or memory-efficient; enable_gqa for grouped heads).
TFLOP/s counts 4·Tq·Tk·Dh·Hq·B multiply-adds ×2, halved when causal. The plugin column is
the one dispatch chose (gpukit.explain). Prints a table; --json writes the numbers.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

# (name, B, T, Hq, Hkv, Dh, causal)
CASES = [
    ("Llama-3-8B prefill 4096, causal", 1, 4096, 32, 8, 128, True),
    ("Llama-3.2-1B prefill 512, causal", 1, 512, 32, 8, 64, True),
    ("Qwen2.5-0.5B prefill 1024, causal", 1, 1024, 14, 2, 64, True),
    ("Whisper tiny encoder, 16 windows", 16, 1500, 6, 6, 64, False),
    ("Whisper large-v3 encoder, 1 window", 1, 1500, 20, 20, 64, False),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit(f"bench_attention: PyTorch is the peer and is needed ({e})")
    import gpukit

    if not torch.cuda.is_available():
        sys.exit("bench_attention: no CUDA device")
    dev = next((d for d in gpukit.devices() if d.is_cuda), None)
    if dev is None:
        sys.exit("bench_attention: no CUDA device visible to GPUkit")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    stream = gpukit.Stream.wrap(torch.cuda.current_stream().cuda_stream, dev)
    gen = torch.Generator(device="cuda").manual_seed(30)
    rows = []
    for name, B, T, Hq, Hkv, Dh, causal in CASES:
        def fresh():
            q = torch.randn(B, T, Hq, Dh, device="cuda", dtype=dtype, generator=gen)
            k = torch.randn(B, T, Hkv, Dh, device="cuda", dtype=dtype, generator=gen)
            v = torch.randn(B, T, Hkv, Dh, device="cuda", dtype=dtype, generator=gen)
            return q, k, v

        q, k, v = fresh()
        out = torch.empty_like(q)
        gq, gk, gv, gout = (gpukit.from_dlpack(t) for t in (q, k, v, out))
        attrs = {"causal": int(causal), "scale": 1.0 / math.sqrt(Dh)}

        def ours():
            gpukit.call("attention", [gq, gk, gv], attrs, out=gout, stream=stream)

        plugin = gpukit.explain("attention", gq, gk, gv, outputs=[gout], **attrs)["chosen"]

        def theirs():
            # SDPA takes [B, H, T, D]: transposed views of the same [B, T, H, D] storage.
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                  v.transpose(1, 2), is_causal=causal,
                                                  enable_gqa=Hq != Hkv).transpose(1, 2)

        # Error against float64 on sequence 0 and the first kv head's query heads.
        out.fill_(float("nan"))
        ours()
        peer = theirs()
        group = Hq // Hkv
        q64 = q[0, :, :group].double().transpose(0, 1)            # [g, T, D]
        k64 = k[0, :, 0].double()                                 # [T, D]
        v64 = v[0, :, 0].double()
        s = q64 @ k64.T / math.sqrt(Dh)
        if causal:
            s.masked_fill_(torch.ones(T, T, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        ref = (torch.softmax(s, -1) @ v64).transpose(0, 1)        # [T, g, D]

        def rel(x):
            x = x[0, :, :group].double()
            return float(torch.linalg.norm(x - ref) / torch.linalg.norm(ref))

        err_ours, err_peer = rel(out), rel(peer)

        def time_ms(fn, poison):
            for _ in range(3):
                fn()
            samples = []
            for _ in range(args.iters):
                if poison:
                    out.fill_(float("nan"))
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            return statistics.median(samples)

        ms_ours = time_ms(ours, True)
        ms_peer = time_ms(theirs, False)
        flops = 4.0 * B * Hq * T * T * Dh * (0.5 if causal else 1.0)
        rows.append({"case": name, "dtype": args.dtype, "plugin": plugin, "torch_ms": ms_peer, "gpukit_ms": ms_ours,
                     "speedup": ms_peer / ms_ours, "torch_tflops": flops / ms_peer / 1e9,
                     "gpukit_tflops": flops / ms_ours / 1e9, "err_gpukit": err_ours,
                     "err_torch": err_peer})
        del q, k, v, out, gq, gk, gv, gout, peer

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}")
    print(f"{'case':38} {'torch ms':>9} {'gpukit ms':>10} {'ours/torch':>10} "
          f"{'TFLOP/s':>15} {'rel err (ours, torch)':>22}  plugin")
    for r in rows:
        print(f"{r['case']:38} {r['torch_ms']:9.3f} {r['gpukit_ms']:10.3f} {r['speedup']:9.2f}x "
              f"{r['gpukit_tflops']:7.1f} /{r['torch_tflops']:6.1f} "
              f"{r['err_gpukit']:10.2e} {r['err_torch']:10.2e}  {r['plugin']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
