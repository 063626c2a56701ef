"""The per-call fast paths: ops create their outputs in one C call (gk_op_call_alloc) and
read the outputs' descriptors on first use, and DLPack imports learn devices once."""
import numpy as np
import pytest

import gpukit
from gpukit import _call


def test_created_outputs_follow_shapes_dtypes_and_attributes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = gpukit.asarray(a, device="cpu")
    for _ in range(3):  # repeated calls reuse the per-thread call structures
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


def test_lazily_read_output_metadata_is_the_librarys_descriptor():
    g = gpukit.asarray(np.ones((2, 3), np.float32), device="cpu")
    r = g + g
    assert r.shape == (2, 3) and r.element_strides == (3, 1) and r.dtype == np.float32
    assert not r.readonly and r.device == "cpu"
    with pytest.raises(AttributeError):
        r.no_such_attribute  # noqa: B018


def test_calls_are_still_checked_by_the_library():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    g = gpukit.asarray(a)
    gpukit.asarray(np.ones(4, np.float32)) + g
    with pytest.raises(gpukit.InvalidArgument, match="read-only"):
        gpukit.add(g, g, out=g)
    with pytest.raises(gpukit.InvalidArgument, match="broadcast"):
        gpukit.asarray(np.ones(3, np.float32)) + g
    # A failed call leaves the per-thread structures usable.
    np.testing.assert_array_equal((g + g).to_numpy(), a + a)


def test_a_call_while_every_pooled_structure_is_in_use_makes_its_own():
    # As when a finalizer runs an op in the middle of another call on the same thread.
    a = np.arange(4, dtype=np.float32)
    g, h = gpukit.asarray(a, device="cpu"), gpukit.asarray(a * 10, device="cpu")
    out = gpukit.empty((4,), np.float32, device="cpu")
    gpukit.add(g, g, out=out)  # the pool holds at least one
    held = list(_call._scratch_pool)
    _call._scratch_pool.clear()  # all taken, as by calls in progress
    snapshot = [[s.tensors[i] for i in range(3)] for s in held]
    try:
        np.testing.assert_array_equal(gpukit.add(g, h, out=out).to_numpy(), a * 11)
        np.testing.assert_array_equal((g * h).to_numpy(), a * a * 10)
        assert [[s.tensors[i] for i in range(3)] for s in held] == snapshot  # untouched
        assert len(_call._scratch_pool) == 1  # the one made for the nested calls, returned
        with pytest.raises(gpukit.InvalidArgument, match=r"inputs\[1\] has type object"):
            gpukit.call("add", [g, object()])  # a failed call returns its structures too
        assert len(_call._scratch_pool) == 1
    finally:
        _call._scratch_pool.extend(held)
    np.testing.assert_array_equal((g + h).to_numpy(), a * 11)


def test_calls_from_several_threads_are_correct():
    import threading

    errors = []

    def work(k):
        try:
            x = gpukit.full((k + 1,), float(k), device="cpu")
            for _ in range(200):
                np.testing.assert_array_equal((x + x).to_numpy(), np.full(k + 1, 2.0 * k))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_repeated_from_dlpack_stays_zero_copy_on_the_cached_device():
    a = np.arange(5, dtype=np.int64)
    for _ in range(2):
        g = gpukit.from_dlpack(a)
        assert g.device == "cpu" and g.data_ptr == a.ctypes.data
    assert np.from_dlpack(g).ctypes.data == a.ctypes.data


class _Producer:
    """A DLPack producer handing out a prepared capsule (or an older protocol)."""

    def __init__(self, capsule, keywords=True):
        self.capsule, self.keywords = capsule, keywords

    def __dlpack_device__(self):
        return (gpukit.DLDeviceType.kDLCPU, 0)  # an IntEnum, as torch returns

    def __dlpack__(self, **kwargs):
        if kwargs and not self.keywords:
            raise TypeError("__dlpack__() got an unexpected keyword argument")
        return self.capsule


def test_from_dlpack_fast_path_takes_producers_without_dlpack_1_keywords():
    a = np.arange(6, dtype=np.float32)
    legacy = gpukit.from_numpy(a).__dlpack__()  # an unversioned "dltensor" capsule
    g = gpukit.from_dlpack(_Producer(legacy, keywords=False))
    np.testing.assert_array_equal(g.to_numpy(), a)
    assert g.shape == (6,) and g.data_ptr == a.ctypes.data


def test_from_dlpack_of_another_major_version_consumes_the_capsule_once():
    from gpukit import _capsule, ffi

    src = gpukit.from_numpy(np.arange(3, dtype=np.int32))
    cap = src.__dlpack__(max_version=(1, 0))
    m = ffi.cast("DLManagedTensorVersioned*", _capsule.versioned_pointer(cap))
    m.version.major = 99
    with pytest.raises(gpukit.FailedPrecondition, match="version 99"):
        gpukit.from_dlpack(_Producer(cap))
    assert _capsule.name_of(cap) == b"used_dltensor_versioned"  # the library ran the deleter
    del cap  # so the capsule's destructor must not run it again
    np.testing.assert_array_equal(src.to_numpy(), [0, 1, 2])


def test_attributes_encoded_once_still_follow_each_calls_values():
    x = gpukit.asarray(np.ones((1, 2), np.float32), device="cpu")
    w = gpukit.asarray(np.ones(2, np.float32), device="cpu")
    out = gpukit.empty((1, 2), device="cpu")
    attrs = {"eps": 3.0}
    for _ in range(2):  # the second round reuses the encoded attributes
        gpukit.call("rmsnorm", [x, w], attrs={"eps": 0.0}, out=[out])
        np.testing.assert_allclose(out.to_numpy(), [[1, 1]])
        attrs["eps"] = 3.0
        gpukit.call("rmsnorm", [x, w], attrs=attrs, out=[out])
        np.testing.assert_allclose(out.to_numpy(), [[0.5, 0.5]])
        attrs["eps"] = 8.0  # the same dict, changed in place
        gpukit.call("rmsnorm", [x, w], attrs=attrs, out=[out])
        np.testing.assert_allclose(out.to_numpy(), [[1 / 3, 1 / 3]], rtol=1e-6)


def test_attribute_keys_tell_types_apart_and_skip_what_they_cannot_name():
    key = _call._attrs_key
    assert len({key({"a": 1}), key({"a": 1.0}), key({"a": True})}) == 3
    assert key({"a": 1, "b": 2}) != key({"b": 2, "a": 1})  # order is part of the encoding
    assert key({"axes": [0, 1]}) is not None and key({"axes": [0, 1]}) != key({"axes": [1, 0]})
    # 0.0 and -0.0 are equal but encode differently; NaN equals nothing; other types.
    for attrs in ({"eps": 0.0}, {"eps": -0.0}, {"eps": float("nan")}, {"eps": np.float32(1)},
                  {"axes": [1.5]}, {"axes": np.array([1])}, {"x": object()}):
        assert key(attrs) is None
    x = gpukit.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), device="cpu")
    out = gpukit.empty((2, 3), device="cpu")
    for _ in range(2):
        gpukit.call("softmax", [x], attrs={"axis": -1}, out=[out])
    with pytest.raises(gpukit.InvalidArgument, match="'axis' has type float; expected int"):
        gpukit.call("softmax", [x], attrs={"axis": -1.0}, out=[out])
    s = gpukit.empty((3,), device="cpu")
    for _ in range(2):
        gpukit.call("sum", [x], attrs={"axes": [0]}, out=[s])
        np.testing.assert_array_equal(s.to_numpy(), [3, 5, 7])
    r = gpukit.empty((2,), device="cpu")
    gpukit.call("sum", [x], attrs={"axes": [1]}, out=[r])
    np.testing.assert_array_equal(r.to_numpy(), [3, 12])
