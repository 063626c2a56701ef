"""The per-call fast paths: the cached output descriptors of ops give the same results as
asking gk_op_output_desc every time, and DLPack imports learn devices once."""
import numpy as np
import pytest

import gpukit
from gpukit import _array


def test_cached_output_descriptors_follow_shapes_dtypes_and_attributes():
    _array._OUTPUT_CACHE.clear()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = gpukit.asarray(a, device="cpu")
    for _ in range(3):  # the first call fills the cache, the others read it
        np.testing.assert_array_equal((g + g).to_numpy(), a + a)
        np.testing.assert_array_equal((g + g[0]).to_numpy(), a + a[0])  # broadcast
        np.testing.assert_array_equal((g.T * 2).to_numpy(), a.T * 2)  # strided input
        np.testing.assert_array_equal(g.sum(axis=0).to_numpy(), a.sum(axis=0))
        np.testing.assert_array_equal(g.sum(axis=1).to_numpy(), a.sum(axis=1))
        np.testing.assert_array_equal(g.sum(axis=1, keepdims=True).to_numpy(),
                                      a.sum(axis=1, keepdims=True))
        assert g.astype(np.float64).dtype == np.float64
        assert g.astype(np.int32).dtype == np.int32
    assert (g + g).shape == (3, 4) and g.sum(axis=0).shape == (4,)
    assert len(_array._OUTPUT_CACHE) > 0


def test_cached_calls_are_still_checked_by_the_library():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    g = gpukit.asarray(a)
    gpukit.asarray(np.ones(4, np.float32)) + g  # fills the cache for this key
    with pytest.raises(gpukit.InvalidArgument, match="read-only"):
        gpukit.add(g, g, out=g)
    with pytest.raises(gpukit.InvalidArgument, match="broadcast"):
        gpukit.asarray(np.ones(3, np.float32)) + g


def test_output_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(_array, "_OUTPUT_CACHE_MAX", 4)
    _array._OUTPUT_CACHE.clear()
    for n in range(1, 12):
        x = gpukit.ones((n,), device="cpu")
        np.testing.assert_array_equal((x + x).to_numpy(), np.full(n, 2, np.float32))
    assert len(_array._OUTPUT_CACHE) <= 4


def test_repeated_from_dlpack_stays_zero_copy_on_the_cached_device():
    a = np.arange(5, dtype=np.int64)
    for _ in range(2):
        g = gpukit.from_dlpack(a)
        assert g.device == "cpu" and g.data_ptr == a.ctypes.data
    assert np.from_dlpack(g).ctypes.data == a.ctypes.data
