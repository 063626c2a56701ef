"""CUDA interop: zero-copy round trips with PyTorch, CuPy and JAX, and a stream hand-off.
Skips (with its reason) without a CUDA device or without the peer library."""
import time

import numpy as np
import pytest

import gpukit


def _cuda_device():
    for d in gpukit.devices():
        if d.is_cuda:
            return d
    return None


CUDA = _cuda_device()
pytestmark = pytest.mark.skipif(CUDA is None, reason="no CUDA device visible to GPUkit "
                                "(no driver, no GPU, or GPUKIT_DEVICE=cpu)")


def test_gpukit_cuda_array_basics():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = gpukit.asarray(a, device=CUDA)
    assert g.device == CUDA and g.__dlpack_device__() == (gpukit.DLDeviceType.kDLCUDA,
                                                          CUDA.ordinal)
    np.testing.assert_array_equal(g.to_numpy(), a)
    np.testing.assert_array_equal(g[:, ::-2].to_numpy(), a[:, ::-2])
    np.testing.assert_array_equal(gpukit.asarray(a.astype(np.int8), device=CUDA)[::2].to_numpy(),
                                  a.astype(np.int8)[::2])  # extent copy path
    np.testing.assert_allclose((g + 1).to_numpy(), a + 1)


def test_torch_round_trip():
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    t = torch.arange(12, dtype=torch.float32, device=f"cuda:{CUDA.ordinal}").reshape(3, 4)
    g = gpukit.from_dlpack(t)
    assert g.data_ptr == t.data_ptr() and g.device == CUDA
    t.add_(1)  # torch's write is visible to gpukit
    torch.cuda.synchronize()
    np.testing.assert_array_equal(g.to_numpy(), t.cpu().numpy())
    back = torch.from_dlpack(g)
    assert back.data_ptr() == t.data_ptr()
    gpukit.add(g, g, out=g)  # gpukit's write is visible to torch
    torch.cuda.synchronize()
    assert back[0, 0].item() == 2.0
    v = gpukit.from_dlpack(t.t()[::2])
    np.testing.assert_array_equal(v.to_numpy(), t.t()[::2].cpu().numpy())
    for dt in (torch.float16, torch.bfloat16, torch.int8, torch.int64, torch.bool, torch.uint8):
        x = torch.ones(5, dtype=dt, device=t.device)
        assert gpukit.from_dlpack(x).data_ptr == x.data_ptr()
        assert torch.from_dlpack(gpukit.from_dlpack(x)).dtype == dt


def test_cupy_round_trip():
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    with cp.cuda.Device(CUDA.ordinal):
        c = cp.arange(10, dtype=cp.float64)
        g = gpukit.from_dlpack(c)
        assert g.data_ptr == c.data.ptr
        c += 1
        cp.cuda.Device().synchronize()
        np.testing.assert_array_equal(g.to_numpy(), cp.asnumpy(c))
        back = cp.from_dlpack(g)
        assert back.data.ptr == c.data.ptr


def test_jax_round_trip():
    jax = pytest.importorskip("jax", reason="JAX not installed")
    try:
        dev = [d for d in jax.devices() if d.platform == "gpu"][0]
    except (RuntimeError, IndexError):
        pytest.skip("JAX has no GPU backend here")
    x = jax.device_put(jax.numpy.arange(8, dtype=jax.numpy.float32), dev)
    g = gpukit.from_dlpack(x)
    assert g.data_ptr == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(g.to_numpy(), np.arange(8))
    y = jax.dlpack.from_dlpack(g * 2) if hasattr(jax.dlpack, "from_dlpack") else None
    if y is not None:
        np.testing.assert_array_equal(np.asarray(y), np.arange(8) * 2)


def test_stream_hand_off_waits_for_the_producer():
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    dev = torch.device(f"cuda:{CUDA.ordinal}")
    side = torch.cuda.Stream(device=dev)
    a = torch.randn(4096, 4096, device=dev)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        # A long kernel chain on the side stream, ending in the value we check.
        out = a
        for _ in range(20):
            out = out @ a
            out = out / out.abs().max()
        out.fill_(7.0)
        # torch syncs its *current* stream (side) into ours: from_dlpack passes stream=1,
        # the legacy default stream GPUkit runs on, so our stream waits for the chain.
        t0 = time.perf_counter()
        g = gpukit.from_dlpack(out)
    host = g.to_numpy()  # runs on our default stream, after the hand-off
    assert (host == 7.0).all()
    # And our export into a consumer's side stream: torch's side stream waits for our work.
    x = gpukit.full((1 << 20,), 3.0, dtype=np.float32, device=CUDA) * 2
    consumer = torch.cuda.Stream(device=dev)
    cap = x.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    with torch.cuda.stream(consumer):
        t = torch.from_dlpack(_Capsule(cap, x.__dlpack_device__()))
        s = float(t.sum().item())
    assert s == 6.0 * (1 << 20)
    assert time.perf_counter() - t0 < 60
    with pytest.raises(BufferError, match="stream=0"):
        x.__dlpack__(stream=0, max_version=(1, 0))
    x.__dlpack__(stream=-1, max_version=(1, 0))  # no synchronisation asked


class _Capsule:
    def __init__(self, cap, device):
        self.cap, self.device = cap, device

    def __dlpack__(self, **kwargs):
        return self.cap

    def __dlpack_device__(self):
        return self.device


# Arrays made inside `with gpukit.task(...)` (on the task's stream, charged to the task) and
# exported to PyTorch crashed the interpreter (SIGSEGV) when the torch tensor was freed after
# the task, its stream and the array were gone, or at exit if it outlived them: so the loop
# runs in a child process whose exit status is checked, before it runs in this one.
_TASK_EXPORT_LOOP = """
import gpukit, torch

def task_export_loop(cuda, iterations, keep):
    dev = torch.device(f"cuda:{cuda.ordinal}")
    side = torch.cuda.Stream(device=dev)
    qos_classes = ("guaranteed", "burstable", "best_effort")
    for i in range(iterations):
        stream = side if i % 2 else torch.cuda.default_stream(dev)
        with torch.cuda.stream(stream):
            w_t = torch.full((64, 257), float(i), dtype=torch.float32, device=dev)
            ones_t = torch.ones((64, 257), dtype=torch.float32, device=dev)
            # from_dlpack orders the producer's stream before the legacy default stream; the
            # task's stream waits for that one when the block opens, so the inputs must be
            # ready by then.
            stream.synchronize()
            qos = qos_classes[i % 3]  # BestEffort tasks request no memory
            with gpukit.task("p", qos=qos, memory="1GiB" if qos != "best_effort" else 0,
                             device=cuda):
                w = gpukit.from_dlpack(w_t)
                ones = gpukit.from_dlpack(ones_t)
                y = ones + w
                t = torch.from_dlpack(y)
                assert t.data_ptr() == y.data_ptr
            got = t.clone()  # on torch's current stream, after the export's hand-off
            want = torch.full((64, 257), float(i + 1), dtype=torch.float32, device=dev)
            assert torch.equal(got, want), (i, got.flatten()[:4].tolist())
            if i % 5 == 0:
                keep.append(t)  # outlives its task and its GPUArray
            del w, ones, y, t, got, w_t, ones_t
    torch.cuda.synchronize(dev)
"""


def _run_loop_in_child() -> "subprocess.CompletedProcess":
    """Runs the loop in a child process (once per session) and keeps the exported tensors
    alive until the child's interpreter exits."""
    import os
    import subprocess
    import sys

    if "result" not in _CHILD:
        code = _TASK_EXPORT_LOOP + (
            "\ncuda = next(d for d in gpukit.devices() if d.is_cuda)\n"
            "kept = []\n"
            "task_export_loop(cuda, 50, kept)\n"
            "print('ok', len(kept))\n")  # `kept` lives until the interpreter exits
        env = dict(os.environ, GPUKIT_LIBRARY=gpukit.LIBRARY_PATH, GPUKIT_LOG_LEVEL="warning",
                   PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(gpukit.__file__)),
                                               os.environ.get("PYTHONPATH", "")]))
        _CHILD["result"] = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code],
                                          env=env, capture_output=True, text=True, timeout=300)
    return _CHILD["result"]


_CHILD = {}


def _needs_torch_cuda():
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


def test_task_arrays_exported_to_torch_leave_a_clean_interpreter_exit():
    _needs_torch_cuda()
    r = _run_loop_in_child()
    assert r.returncode == 0, f"exit status {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}"
    assert r.stdout.strip() == "ok 10", r.stdout


def test_task_arrays_exported_to_torch_in_a_loop():
    torch = _needs_torch_cuda()
    # A crash here would end the whole pytest run: the child goes first.
    r = _run_loop_in_child()
    if r.returncode != 0:
        pytest.fail(f"the same loop ended a child process with exit status {r.returncode} "
                    "(test_task_arrays_exported_to_torch_leave_a_clean_interpreter_exit); not "
                    "run in this process")
    scope = {}
    exec(_TASK_EXPORT_LOOP, scope)  # noqa: S102 — the code the child process ran
    keep = []
    scope["task_export_loop"](CUDA, 50, keep)
    for k, t in zip(range(0, 50, 5), keep):
        assert torch.equal(t, torch.full_like(t, float(k + 1)))
    keep.clear()
    torch.cuda.synchronize()
