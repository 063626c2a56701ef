"""GPUArray on the cpu device against NumPy: creation, views, dtypes, ops, errors."""
import json

import numpy as np
import pytest

import gpukit

rng = np.random.default_rng(1234)
FLOATS = [np.float32, np.float64]


def rand(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_import_and_runtime_handles():
    devs = gpukit.devices()
    assert devs[0].kind == "cpu" and devs[0].id == 0
    assert devs[0].props["sm_count"] >= 1
    assert gpukit.abi_version()[0] == 1
    assert any(p["name"] == "cpu" and p["loaded"] for p in gpukit.plugins())
    assert "add" in gpukit.ops()
    info = gpukit.info()
    assert "devices" in info and "plugins" in info
    x = gpukit.zeros((2, 3), device="cpu")
    e = gpukit.explain("add", x, x)
    assert e["chosen"] == "cpu" and e["op"] == "add"
    e = gpukit.explain("sum", ((4, 5), np.float32), device="cpu", axes=[1])
    assert e["op"] == "sum"


def test_streams_and_events_on_cpu_are_complete():
    s = gpukit.Stream("cpu")
    ev = s.record_event()
    assert ev.query()
    ev.synchronize()
    s.wait_event(ev)
    s.synchronize()
    assert s.native == 0


def test_creation_functions():
    np.testing.assert_array_equal(gpukit.zeros((2, 3), device="cpu").to_numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(gpukit.ones(4, np.int32, device="cpu").to_numpy(), np.ones(4))
    np.testing.assert_array_equal(gpukit.full((2,), 7.5, device="cpu").to_numpy(), [7.5, 7.5])
    np.testing.assert_array_equal(gpukit.arange(2, 10, 3, device="cpu").to_numpy(),
                                  np.arange(2, 10, 3))
    e = gpukit.empty((3, 0), np.float64, device="cpu")
    assert e.shape == (3, 0) and e.dtype == np.float64 and e.size == 0
    a = gpukit.asarray([[1, 2], [3, 4]], device="cpu")
    assert a.dtype == np.int64 and a.tolist() == [[1, 2], [3, 4]]


def test_properties_match_numpy():
    a = rand((3, 4, 5))
    g = gpukit.asarray(a)
    assert g.shape == a.shape and g.strides == a.strides and g.ndim == 3
    assert g.dtype == a.dtype and g.size == a.size and g.nbytes == a.nbytes
    assert str(g.device) == "cpu" and len(g) == 3


@pytest.mark.parametrize("key", [
    (slice(None), slice(None, None, 2)),
    (slice(None, None, -1),),
    (1,),
    (-1, slice(3, 0, -2)),
    (Ellipsis, 2),
    (None, slice(1, 3)),
    (slice(5, 1),),
    (slice(None), None, slice(None, None, -3), 0),
])
def test_basic_indexing_views(key):
    a = rand((4, 6, 3))
    g = gpukit.asarray(a)
    v = g[key]
    np.testing.assert_array_equal(v.to_numpy(), a[key])
    assert v.shape == a[key].shape
    # Views share memory: a write through NumPy shows up.
    a[...] += 1
    np.testing.assert_array_equal(v.to_numpy(), a[key])


def test_index_errors():
    g = gpukit.asarray(rand((2, 3)))
    with pytest.raises(IndexError):
        g[2]
    with pytest.raises(IndexError):
        g[0, 0, 0]
    with pytest.raises(IndexError):
        g[[0, 1]]


def test_transpose_reshape():
    a = rand((2, 3, 4))
    g = gpukit.asarray(a)
    np.testing.assert_array_equal(g.T.to_numpy(), a.T)
    np.testing.assert_array_equal(g.transpose(1, 0, 2).to_numpy(), a.transpose(1, 0, 2))
    r = g.reshape(6, -1)
    assert r.data_ptr == g.data_ptr  # contiguous: a view
    np.testing.assert_array_equal(r.to_numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(g.T.reshape(-1).to_numpy(), a.T.reshape(-1))
    with pytest.raises(ValueError):
        g.reshape(5, 5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int16,
                                   np.int32, np.int64, np.uint8])
def test_arithmetic_matches_numpy(dtype):
    if np.issubdtype(dtype, np.integer):
        a = rng.integers(-20 if dtype != np.uint8 else 30, 60, size=(3, 4)).astype(dtype)
        b = rng.integers(1, 5, size=(4,)).astype(dtype)
    else:
        a, b = rand((3, 4), dtype), rand((4,), dtype)
    ga, gb = gpukit.asarray(a), gpukit.asarray(b)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == np.float16 else dict(rtol=1e-6)
    np.testing.assert_allclose((ga + gb).to_numpy(), a + b, **tol)
    np.testing.assert_allclose((ga - gb).to_numpy(), a - b, **tol)
    np.testing.assert_allclose((ga * gb).to_numpy(), a * b, **tol)
    np.testing.assert_allclose((ga * 2).to_numpy(), a * 2, **tol)
    np.testing.assert_allclose((2 + ga).to_numpy(), 2 + a, **tol)
    np.testing.assert_allclose((3 - ga).to_numpy(), 3 - a, **tol)
    if dtype in (np.float32, np.float64, np.float16, np.int32, np.int64):
        np.testing.assert_allclose((ga / gb).to_numpy(), a / b, **tol)
        np.testing.assert_allclose((1 / gb).to_numpy(), 1 / b, **tol)
    if dtype != np.uint8:
        np.testing.assert_allclose((-ga).to_numpy(), -a, **tol)
        np.testing.assert_allclose(abs(ga).to_numpy(), abs(a), **tol)


def test_broadcasting_and_mixed_dtypes():
    a, b = rand((2, 1, 4)), rand((3, 1), np.float64)
    r = gpukit.asarray(a) + gpukit.asarray(b)
    assert r.dtype == np.float64 and r.shape == (2, 3, 4)
    np.testing.assert_allclose(r.to_numpy(), a + b)
    i = gpukit.asarray(np.arange(4, dtype=np.int32))
    np.testing.assert_allclose((i / 2).to_numpy(), np.arange(4) / 2)
    assert (gpukit.asarray(a) * 2.0).dtype == np.float32
    np.testing.assert_allclose((a + gpukit.asarray(a)).to_numpy(), 2 * a)  # NumPy on the left


def test_strided_inputs_to_ops():
    a = rand((6, 8))
    g = gpukit.asarray(a)
    np.testing.assert_allclose((g[::2, ::-3] + g[1::2, 1::3]).to_numpy(),
                               a[::2, ::-3] + a[1::2, 1::3], rtol=1e-6)
    np.testing.assert_allclose(g.T.sum(axis=0).to_numpy(), a.T.sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_reductions_and_softmax(dtype):
    a = rand((3, 4, 5), dtype)
    g = gpukit.asarray(a)
    for axis in (None, 0, -1, (0, 2)):
        for keepdims in (False, True):
            np.testing.assert_allclose(g.sum(axis, keepdims).to_numpy(),
                                       a.sum(axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(g.mean(axis, keepdims).to_numpy(),
                                       a.mean(axis, keepdims=keepdims), rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(g.max(axis, keepdims).to_numpy(),
                                          a.max(axis, keepdims=keepdims))
            np.testing.assert_array_equal(g.min(axis, keepdims).to_numpy(),
                                          a.min(axis, keepdims=keepdims))
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(g.softmax(axis=1).to_numpy(), e / e.sum(1, keepdims=True),
                               rtol=1e-5)
    assert float(gpukit.sum(g)) == pytest.approx(float(a.sum()), rel=1e-5)
    assert gpukit.asarray(np.arange(5, dtype=np.int64)).mean().item() == 2.0


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)), ((4,), (4, 3)),
                                   ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_matches_numpy(sa, sb):
    a, b = rand(sa, np.float64), rand(sb, np.float64)
    r = gpukit.asarray(a) @ gpukit.asarray(b)
    np.testing.assert_allclose(r.to_numpy(), a @ b, rtol=1e-10)
    np.testing.assert_allclose((gpukit.asarray(a.T).T @ b).to_numpy(), a @ b, rtol=1e-10)


def test_astype():
    a = rand((3, 3)) * 10
    g = gpukit.asarray(a)
    for dt in (np.float64, np.float16, np.int32, np.int64):
        np.testing.assert_array_equal(g.astype(dt).to_numpy(), a.astype(dt))
    np.testing.assert_array_equal(g.astype(np.int8).to_numpy(), a.astype(np.int8))  # host path
    np.testing.assert_array_equal(g[:, ::-1].astype(np.uint8).to_numpy(),
                                  a[:, ::-1].astype(np.uint8))


def test_errors_carry_the_c_message():
    x, y = gpukit.zeros((2, 3), device="cpu"), gpukit.zeros((4,), device="cpu")
    with pytest.raises(gpukit.InvalidArgument) as e:
        x + y
    assert isinstance(e.value, ValueError) and isinstance(e.value, gpukit.GpukitError)
    assert "add" in str(e.value) and e.value.status == 3
    with pytest.raises(gpukit.GpukitError):
        gpukit.asarray(np.ones((2, 3), np.float32)) @ gpukit.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(gpukit.NotFound):
        gpukit.explain("no_such_op", x)
    with pytest.raises(ValueError):
        gpukit.runtime().device("cuda:7")
    with pytest.raises(TypeError, match="complex64"):
        gpukit.asarray(np.ones(3, np.complex64))


@pytest.mark.parametrize("typestr", [">f4", ">f8", ">f2", ">i2", ">i4", ">i8", "<f4", "=i4"])
def test_numpy_input_of_either_byte_order_keeps_its_values(typestr):
    src = np.array([1, 2, -3, 70], typestr)
    g = gpukit.asarray(src)
    assert g.dtype == src.dtype.newbyteorder("=") and g.dtype.isnative
    np.testing.assert_array_equal(g.to_numpy(), [1, 2, -3, 70])
    np.testing.assert_array_equal(gpukit.asarray(src, device="cpu").to_numpy(), [1, 2, -3, 70])
    np.testing.assert_array_equal(gpukit.asarray(src, dtype=np.float64).to_numpy(),
                                  [1, 2, -3, 70])
    np.testing.assert_array_equal(gpukit.asarray(src[::-2]).to_numpy(), [70, 2])
    np.testing.assert_array_equal(gpukit.asarray([src, src]).to_numpy(), [[1, 2, -3, 70]] * 2)
    # On the cpu device, which serves add for every dtype (CUDA's lacks f64 and i16..i64).
    np.testing.assert_array_equal((gpukit.asarray(src, device="cpu") + 1).to_numpy(),
                                  [2, 3, -2, 71])


def test_transpose_refuses_out_of_range_and_repeated_axes():
    g = gpukit.asarray(rand((2, 3)))
    np.testing.assert_array_equal(g.transpose(-1, 0).to_numpy(), g.to_numpy().T)
    for axes in [(3, 0), (0, 2), (-3, 0), (0, -3)]:
        with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions")
                           else np.AxisError, match="out of bounds for array of dimension 2"):
            g.transpose(*axes)
    with pytest.raises(ValueError, match="repeated axis"):
        g.transpose(1, -1)
    with pytest.raises(ValueError, match="don't match"):
        g.transpose(0)
    with pytest.raises(TypeError, match="integer"):
        g.transpose(0.0, 1)


@pytest.mark.parametrize("make", [gpukit.empty, gpukit.zeros, gpukit.ones],
                         ids=["empty", "zeros", "ones"])
def test_shapes_past_int64_are_refused_before_the_c_call(make):
    with pytest.raises(ValueError, match="bytes, more than the 2\\*\\*63 - 1"):
        make((2**61,), dtype="float64")
    with pytest.raises(ValueError, match="elements, more than the 2\\*\\*63 - 1"):
        make((2**32, 2**32), dtype=np.uint8)
    with pytest.raises(ValueError, match="elements"):
        make((2**64,), dtype=np.int8)
    with pytest.raises(ValueError, match="negative dimensions"):
        make((2, -1))
    with pytest.raises(TypeError, match="not an integer"):
        make((2.5,))
    assert make((3, 0), dtype=np.float64).shape == (3, 0)
    assert make((3, 2), dtype=np.float64).nbytes == 48


def test_plugin_views_survive_manifest_fields_that_are_not_utf8(tmp_path):
    # A broken plugin's manifest with Latin-1 bytes: listed with U+FFFD, never an exception.
    (tmp_path / "latin.yaml").write_bytes(
        b"schema: 1\nname: latin\nversion: 1.0.\xe9\nplugin_abi: \"1.0\"\n"
        b"library: missing.so\nfamily: caf\xe9\ndevice: cpu\npriority: 1\n"
        b"ops:\n  - {name: neg, dtypes: [f32]}\n")
    rt = gpukit.Runtime(devices="cpu", plugin_path=str(tmp_path), ignore_environment=True)
    latin = [p for p in rt.plugins() if p["name"] == "latin"]
    assert latin and latin[0]["family"] == "caf\ufffd" and not latin[0]["loaded"]
    assert "latin" in json.dumps(rt.info())
