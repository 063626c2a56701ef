"""gpukit.call, the one call path behind every op: its arguments, its outputs, streams,
threads, and that it keeps no references or memory."""
import importlib.util
import re
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import gpukit
from gpukit import _call, ffi


def arr(*shape, dtype=np.float32, device="cpu", seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return gpukit.asarray(a, device=device)


def test_gpukit_call_is_the_single_python_implementation():
    assert gpukit.call is _call.call
    assert not hasattr(gpukit, "CALL_PATH")
    for name in ("gpukit._compiled_call", "gpukit._call_path"):
        assert importlib.util.find_spec(name) is None, f"{name} is still importable"
        assert name not in sys.modules


# ---- arguments ------------------------------------------------------------------------------

X = arr(2, 3, seed=1)
Y = arr(2, 3, seed=2)


@pytest.mark.parametrize("args,kwargs,words", [
    (("add", []), {}, ["'add'", "inputs is empty"]),
    (("add", ()), {}, ["inputs is empty"]),
    (("add", iter([])), {}, ["inputs is empty"]),
    ((None, [X, Y]), {}, ["op must be a str", "NoneType"]),
    ((b"add", [X, Y]), {}, ["op must be a str", "bytes"]),
    ((7, [X, Y]), {}, ["op must be a str", "int"]),
    ((None, []), {}, ["op must be a str"]),
    (("add", [X, object()]), {}, [r"inputs\[1\] has type object"]),
    (("add", [X, np.ones((2, 3), np.float32)]), {}, [r"inputs\[1\] has type ndarray",
                                                     "gpukit.asarray"]),
    (("add", [X] * 20), {}, [r"inputs\[0\]|got 20 inputs"]),
    (("add", [X] + [None] * 20), {}, [r"inputs\[1\] has type NoneType"]),
    (("add", 5), {}, ["inputs must be a list or tuple", "int"]),
    (("add", [X, Y]), {"out": object()}, [r"out\[0\] has type object"]),
    (("add", [X, Y]), {"out": [gpukit.empty((2, 3), device="cpu"), 3]},
     [r"out\[1\] has type int"]),
    (("add", [X, Y]), {"stream": "s"}, ["stream must be a gpukit.Stream", "str"]),
])
def test_bad_arguments_raise_invalid_argument_naming_the_problem(args, kwargs, words):
    with pytest.raises(gpukit.InvalidArgument) as info:
        gpukit.call(*args, **kwargs)
    for w in words:
        assert re.search(w, str(info.value)), str(info.value)
    # The failed call returned its structures: the next call works.
    np.testing.assert_array_equal(gpukit.call("add", [X, Y]).to_numpy(),
                                  X.to_numpy() + Y.to_numpy())


def test_invalid_argument_is_also_a_value_error():
    with pytest.raises(ValueError, match="inputs is empty"):
        gpukit.call("add", [])


def test_inputs_may_be_any_iterable_of_arrays():
    expected = X.to_numpy() + Y.to_numpy()
    for inputs in ([X, Y], (X, Y), iter([X, Y]), (a for a in (X, Y))):
        np.testing.assert_array_equal(gpukit.call("add", inputs).to_numpy(), expected)


def test_a_str_attribute_reaches_the_op():
    x = arr(2, 2)
    out = gpukit.call("cast", [x], {"dtype": "f64"}, gpukit.empty((2, 2), np.float64,
                                                                  device="cpu"))
    np.testing.assert_array_equal(out.to_numpy(), x.to_numpy().astype(np.float64))
    with pytest.raises(gpukit.InvalidArgument):
        gpukit.call("cast", [x], {"dtype": "f64"}, gpukit.empty((2, 2), np.int32, device="cpu"))


def test_library_errors_keep_their_class_and_message():
    with pytest.raises(gpukit.NotFound, match="unknown op 'no_such_op'"):
        gpukit.call("no_such_op", [X])
    with pytest.raises(gpukit.InvalidArgument, match="unknown attribute 'nope'"):
        gpukit.call("softmax", [X], {"axis": 0, "nope": 1})
    with pytest.raises(gpukit.InvalidArgument, match="broadcast"):
        gpukit.call("add", [X, arr(4)])


# ---- outputs --------------------------------------------------------------------------------

def test_created_outputs_are_arrays_whose_descriptor_is_read_on_first_use():
    x = arr(3, 4)
    r = gpukit.call("softmax", [x], {"axis": -1})
    assert type(r) is gpukit.GPUArray and r._rt is x._rt and r._device is x._device
    assert r._stream is None and ffi.typeof(r._t) is ffi.typeof("gk_tensor*")
    with pytest.raises(AttributeError):
        object.__getattribute__(r, "_meta")  # the descriptor is read on first use
    assert r.shape == (3, 4) and r.dtype == np.float32
    s = np.exp(x.to_numpy())
    np.testing.assert_allclose(r.to_numpy(), s / s.sum(-1, keepdims=True), rtol=1e-6)
    out, total = gpukit.call("add_rmsnorm", [x, x, arr(4)], num_outputs=2)
    np.testing.assert_allclose(total.to_numpy(), 2 * x.to_numpy(), rtol=1e-6)


def test_given_outputs_are_returned_as_given():
    out, out2 = gpukit.empty((2, 3), device="cpu"), gpukit.empty((2, 3), device="cpu")
    assert gpukit.call("add", [X, Y], out=out) is out
    assert gpukit.call("add", [X, Y], out=[out]) is out
    assert gpukit.call("add", (X, Y), out=(out,)) is out
    w = arr(3, seed=3)
    r = gpukit.call("add_rmsnorm", [X, Y, w], out=[out, out2])
    assert type(r) is tuple and r[0] is out and r[1] is out2
    np.testing.assert_allclose(out2.to_numpy(), X.to_numpy() + Y.to_numpy(), rtol=1e-6)


# ---- streams --------------------------------------------------------------------------------

def test_an_explicit_stream_is_used_and_recorded(dev):
    x = gpukit.full((8,), 1.0, np.float32, device=dev)
    t = gpukit.task("explicit", qos="best_effort", device=dev)
    r = gpukit.call("add", [x, x], stream=t.stream)
    assert r._stream is t.stream and t.info()["ops_launched"] == 1
    out = gpukit.empty((8,), device=dev)
    assert gpukit.call("add", [x, x], out=out, stream=t.stream) is out
    assert out._stream is t.stream and t.info()["ops_launched"] == 2
    gpukit.call("add", [x, x], out=out)  # the default stream again
    assert out._stream is None and t.info()["ops_launched"] == 2


def test_the_task_stream_serves_its_device_only(dev):
    x = gpukit.full((8,), 1.0, np.float32, device=dev)
    other = gpukit.full((8,), 1.0, np.float32, device="cpu")  # the default runtime's
    with gpukit.task("block", qos="burstable", memory="1MiB", device=dev) as t:
        r = gpukit.call("add", [x, x])
        assert r._stream is t.stream and t.info()["ops_launched"] == 1
        s = gpukit.call("add", [other, other])  # another device: its default stream
        assert s._stream is None and t.info()["ops_launched"] == 1
        out = gpukit.empty((8,), device=dev)
        gpukit.call("add", [x, x], out=[out])
        assert out._stream is t.stream and t.info()["ops_launched"] == 2
    r = gpukit.call("add", [x, x])
    assert r._stream is None and t.info()["ops_launched"] == 2


# ---- threads, references, memory ------------------------------------------------------------

def test_many_threads_calling_at_once_get_their_own_results():
    errors = []
    barrier = threading.Barrier(8)

    def work(k):
        try:
            x = gpukit.full((k + 1, 4), float(k), np.float32, device="cpu")
            out = gpukit.empty((k + 1, 4), device="cpu")
            barrier.wait()
            for i in range(300):
                if i % 2:
                    r = gpukit.call("add", [x, x])
                else:
                    r = gpukit.call("add", [x, x], attrs={}, out=[out])
                np.testing.assert_array_equal(r.to_numpy(), np.full((k + 1, 4), 2.0 * k))
                r = gpukit.call("rmsnorm", [x], attrs={"eps": float(k)})
                assert r.shape == (k + 1, 4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_ten_thousand_calls_keep_no_references_and_no_memory(dev):
    x = gpukit.full((4,), 1.0, np.float32, device=dev)
    w = gpukit.full((4,), 2.0, np.float32, device=dev)
    out = gpukit.empty((4,), device=dev)
    eps = float("1e-3")  # objects of this test's own, so their counts are this test's
    name = "".join(["e", "p", "s"])
    mode = "".join(["f", "6", "4"])
    op = "".join(["rms", "norm"])
    attrs = {name: eps}
    stream = gpukit.task("refs", qos="best_effort", device=dev).stream
    watched = [x, w, out, eps, name, mode, op, attrs, stream, x._t, x._rt, x._device]

    def run(n):
        for _ in range(n):
            gpukit.call(op, [x, w], attrs=attrs, out=out)
            gpukit.call(op, [x, w], attrs, None, 1, stream)
            gpukit.call("cast", [x], {"dtype": mode, "unused": None})
            try:
                gpukit.call(op, [x, w], attrs={name: 1}, out=out)  # refused by the library
            except gpukit.InvalidArgument:
                pass
            try:
                gpukit.call(op, [])  # refused by the binding
            except gpukit.InvalidArgument:
                pass
            gpukit.call("sum", [x], attrs={"axes": [0]})

    run(200)  # caches, interned strings, the pool
    in_use = dev.memory_stats()["bytes_in_use"]
    refs = [sys.getrefcount(o) for o in watched]
    tracemalloc.start()
    try:
        run(200)
        base = tracemalloc.get_traced_memory()[0]
        run(10000)
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(o) for o in watched] == refs
    assert grown < 64 * 1024, f"{grown} bytes more after 10000 rounds"
    assert dev.memory_stats()["bytes_in_use"] == in_use  # every created output released
