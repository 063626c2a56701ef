"""DLPack exchange with NumPy on the cpu device: zero copy both ways, read-only, strides,
every dtype, refusals, capsule protocol details and reference counting."""
import gc
import os

import numpy as np
import pytest

import gpukit
from gpukit import _capsule

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.bool_]


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_is_zero_copy_for_every_dtype(dtype):
    a = (np.arange(24) % 3).astype(dtype).reshape(4, 6)
    g = gpukit.from_dlpack(a)
    assert g.dtype == a.dtype and g.shape == a.shape
    assert g.data_ptr == a.ctypes.data
    b = np.from_dlpack(g)
    assert b.ctypes.data == a.ctypes.data and b.dtype == a.dtype
    a[1, 2] = 1  # writes are visible across
    assert b[1, 2] == 1 and g.to_numpy()[1, 2] == 1


def test_bfloat16_round_trip():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    g = gpukit.asarray(a)  # NumPy cannot export bfloat16 via DLPack: host copy
    assert g.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(g.to_numpy().astype(np.float32), np.arange(6))
    np.testing.assert_array_equal((g + g).astype(np.float32).to_numpy(), 2 * np.arange(6))


def test_gpukit_writes_are_visible_in_numpy():
    a = np.zeros(4, np.float32)
    g = gpukit.from_numpy(a)
    gpukit.add(gpukit.asarray(np.ones(4, np.float32)), 2.0, out=g)
    np.testing.assert_array_equal(a, [3, 3, 3, 3])
    h = np.from_dlpack(gpukit.ones(3, device="cpu"))
    h[0] = 5
    assert h.flags.writeable


def test_read_only_numpy_arrives_read_only_and_ops_refuse_writes():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    g = gpukit.asarray(a)
    assert g.readonly and g.data_ptr == a.ctypes.data
    with pytest.raises(gpukit.InvalidArgument, match="read-only"):
        gpukit.add(g, g, out=g)
    r = g + g
    assert not r.readonly
    np.testing.assert_array_equal(r.to_numpy(), 2 * a)
    assert g[1:].readonly and g.T.readonly
    assert not g.to_numpy().flags.writeable
    back = np.from_dlpack(g)  # versioned export carries READ_ONLY
    assert not back.flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        g.__dlpack__()  # legacy capsule cannot say read-only


def test_strided_and_sliced_numpy_views():
    a = np.arange(60, dtype=np.float64).reshape(5, 12)
    for view in (a[::2, ::3], a[:, ::-1], a.T, a[1:4, 5:2:-1], a[:, 3], a[2:2]):
        g = gpukit.from_dlpack(view)
        if view.size:
            assert g.data_ptr == view.ctypes.data
        assert g.strides == view.strides
        np.testing.assert_array_equal(g.to_numpy(), view)
        np.testing.assert_array_equal((g * 1).to_numpy(), view)
        back = np.from_dlpack(g)
        np.testing.assert_array_equal(back, view)


def test_zero_size_and_scalar():
    g = gpukit.from_dlpack(np.zeros((0, 3), np.float32))
    assert g.shape == (0, 3) and np.from_dlpack(g).shape == (0, 3)
    s = gpukit.from_dlpack(np.array(3.5))
    assert s.shape == () and s.item() == 3.5


def test_capsule_protocol():
    g = gpukit.arange(6, dtype=np.float32, device="cpu")
    assert g.__dlpack_device__() == (gpukit.DLDeviceType.kDLCPU, 0)
    cap = g.__dlpack__(max_version=(1, 0))
    assert _capsule.name_of(cap) == b"dltensor_versioned"
    legacy = g.__dlpack__()
    assert _capsule.name_of(legacy) == b"dltensor"
    assert _capsule.name_of(g.__dlpack__(max_version=(0, 8))) == b"dltensor"
    h = gpukit.from_dlpack(_Holder(cap))
    assert _capsule.name_of(cap) == b"used_dltensor_versioned"
    assert h.data_ptr == g.data_ptr
    with pytest.raises(BufferError):
        gpukit.from_dlpack(_Holder(cap))  # consumed capsules cannot be used twice
    del legacy  # an unconsumed capsule's destructor calls the deleter (no leak, no crash)
    copied = g.__dlpack__(max_version=(1, 0), copy=True)
    c = gpukit.from_dlpack(_Holder(copied))
    assert c.data_ptr != g.data_ptr
    np.testing.assert_array_equal(c.to_numpy(), g.to_numpy())
    with pytest.raises(BufferError, match="stream"):
        g.__dlpack__(stream=5)


class _Holder:
    """Hands out a prepared capsule, as a producer would."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def test_refusals():
    g = gpukit.zeros(3, device="cpu")
    with pytest.raises(BufferError, match="kDLROCM"):
        gpukit.from_dlpack(_Holder(None, device=(10, 0)))
    with pytest.raises((BufferError, ValueError), match="cuda"):
        gpukit.from_dlpack(_Holder(None, device=(2, 7)))  # no CUDA device 7 here
    with pytest.raises(BufferError, match="copy=False"):
        g.__dlpack__(max_version=(1, 0), dl_device=(2, 0), copy=False)
    with pytest.raises(gpukit.InvalidArgument, match=r"complex \(code 5, bits 64, lanes 1\)"):
        gpukit.from_dlpack(np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="complex64"):
        gpukit.from_numpy(np.ones(2, np.complex64))
    with pytest.raises(BufferError, match="copy=False"):
        gpukit.asarray([1, 2, 3], copy=False)
    with pytest.raises(TypeError):
        gpukit.from_dlpack(object())


def test_no_use_after_free_when_the_producer_goes_first():
    a = np.arange(1000, dtype=np.float64)
    g = gpukit.from_dlpack(a)
    del a
    gc.collect()
    assert float(g.sum()) == sum(range(1000))
    b = np.from_dlpack(gpukit.arange(10, dtype=np.int64, device="cpu") * 2)
    gc.collect()
    np.testing.assert_array_equal(b, np.arange(10) * 2)
    v = gpukit.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))[1:, ::2].T
    gc.collect()
    np.testing.assert_array_equal(v.to_numpy(), np.arange(12).reshape(3, 4)[1:, ::2].T)


def test_no_leak_after_100k_exchanges():
    import tracemalloc

    a = np.ones((16,), np.float32)

    def exchange(n):
        for _ in range(n):
            g = gpukit.from_dlpack(a)
            b = np.from_dlpack(g)
            del g, b

    exchange(2000)  # warm up caches
    gc.collect()
    rss0 = rss_bytes()
    exchange(100_000)
    gc.collect()
    rss_growth = rss_bytes() - rss0
    tracemalloc.start()  # slows Python down, so over fewer exchanges
    snap0 = tracemalloc.take_snapshot()
    exchange(10_000)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    py_growth = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    # A leak of one DLPack struct or tensor per exchange would be >= 10k/100k * 100 bytes.
    assert py_growth < 200_000, py_growth
    assert rss_growth < 8_000_000, rss_growth
