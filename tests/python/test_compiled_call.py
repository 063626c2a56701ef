"""gpukit.call's two implementations: the compiled one (gpukit._compiled_call, when built)
and the Python one (_array._call_python) give the same results and the same errors, case by
case; what the compiled one does not serve it hands to the Python one; it is thread-safe,
keeps no references and refuses objects its self-check did not see."""
import inspect
from collections import deque
import os
import shutil
import subprocess
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import gpukit
from gpukit import _array, _call_path, ffi

COMPILED = _call_path.module
BUILT = next((p for p in _call_path.candidates() if os.path.isfile(p)), None)
needs_compiled = pytest.mark.skipif(
    COMPILED is None, reason=f"gpukit._compiled_call not in use: {_call_path.REASON}")

IMPLS = {"compiled": COMPILED.call if COMPILED is not None else None,
         "python": _array._call_python}


@pytest.fixture(params=["compiled", "python"])
def impl(request):
    if IMPLS[request.param] is None:
        pytest.skip(f"gpukit._compiled_call not in use: {_call_path.REASON}")
    return IMPLS[request.param]


def counts():
    return COMPILED.counts() if COMPILED is not None else (0, 0)


def arr(*shape, dtype=np.float32, device="cpu", seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return gpukit.asarray(a, device=device)


# ---- which implementation runs -------------------------------------------------------------

def test_the_compiled_call_is_gpukit_call_when_it_is_built():
    if BUILT is None:
        if os.environ.get("GPUKIT_EXPECT_COMPILED_CALL") == "1":
            pytest.fail(f"the build made no {_call_path.FILE_NAME}")
        pytest.skip(f"{_call_path.FILE_NAME} not built: {_call_path.REASON}")
    if os.environ.get("GPUKIT_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("GPUKIT_PURE_PYTHON is set")
    assert gpukit.CALL_PATH == "compiled", _call_path.REASON
    assert gpukit.call is COMPILED.call and _array.call is COMPILED.call
    x = arr(2, 3)
    before = COMPILED.counts()
    x + x  # an operator goes through _array.call
    gpukit.call("softmax", [x], attrs={"axis": -1}, out=gpukit.empty((2, 3), device="cpu"))
    assert COMPILED.counts() == (before[0] + 2, before[1])


def test_gpukit_pure_python_keeps_the_python_implementation():
    code = ("import gpukit, gpukit._array as a, gpukit._call_path as c; "
            "assert gpukit.CALL_PATH == 'python' and gpukit.call is a._call_python, c.REASON; "
            "assert 'GPUKIT_PURE_PYTHON' in c.REASON; print('ok')")
    env = dict(os.environ, GPUKIT_PURE_PYTHON="1", GPUKIT_LIBRARY=gpukit.LIBRARY_PATH,
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(gpukit.__file__)),
                                           os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@needs_compiled
def test_the_compiled_call_has_the_python_signature():
    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(COMPILED.call) == params(_array._call_python)


# ---- same results and errors, case by case -------------------------------------------------

def outcome(fn):
    """What a call gave, comparable across implementations: results by value, type, stream
    and identity with the given `out`, errors by type and message."""
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001
        return ("raised", type(e), str(e))

    def describe(a):
        if not isinstance(a, gpukit.GPUArray):
            return ("object", a)
        return ("array", type(a), a.to_numpy().tolist(), a.dtype, a.shape, a._stream,
                a._device, a._rt, type(a._t), ffi.typeof(a._t))

    if isinstance(r, tuple):
        return ("tuple", tuple(describe(a) for a in r), tuple(id(a) for a in r))
    return ("one", describe(r), id(r))


X = arr(2, 3, seed=1)
Y = arr(2, 3, seed=2)
W = arr(3, seed=3)
OUT = gpukit.empty((2, 3), device="cpu")
OUT2 = gpukit.empty((2, 3), device="cpu")


class SubArray(gpukit.GPUArray):
    __slots__ = ()


def _sub(x):
    s = object.__new__(SubArray)
    s._rt, s._device, s._stream = x._rt, x._device, None
    gpukit.lib.gk_tensor_retain(x._t)
    s._t = x._t
    return s


SUB = _sub(X)
_ro = np.zeros((2, 3), np.float32)
_ro.flags.writeable = False
READ_ONLY = gpukit.asarray(_ro)

# (name, served by the compiled path, arguments, keyword arguments)
CASES = [
    # served
    ("add, inputs list", True, ("add", [X, Y]), {}),
    ("add, inputs tuple", True, ("add", (X, Y)), {}),
    ("attrs None positional, out positional", True, ("add", [X, Y], None, OUT), {}),
    ("attrs empty dict, out list", True, ("add", [X, Y]), {"attrs": {}, "out": [OUT]}),
    ("out tuple of one", True, ("add", [X, Y]), {"out": (OUT,)}),
    ("softmax int attr", True, ("softmax", [X]), {"attrs": {"axis": -1}}),
    ("softmax bool attr is an int", True, ("softmax", [X]), {"attrs": {"axis": True}}),
    ("softmax float attr refused by the library", True, ("softmax", [X]),
     {"attrs": {"axis": -1.0}}),
    ("None values are skipped", True, ("softmax", [X]), {"attrs": {"axis": 0, "x": None}}),
    ("only None values", True, ("softmax", [X]), {"attrs": {"axis": None}}),
    ("rmsnorm float attr", True, ("rmsnorm", [X, W]), {"attrs": {"eps": 0.5}}),
    ("rmsnorm eps 0.0", True, ("rmsnorm", [X, W]), {"attrs": {"eps": 0.0}}),
    ("rmsnorm eps -0.0", True, ("rmsnorm", [X, W]), {"attrs": {"eps": -0.0}}),
    ("rmsnorm eps nan", True, ("rmsnorm", [X, W]), {"attrs": {"eps": float("nan")}}),
    ("rmsnorm eps inf", True, ("rmsnorm", [X, W]), {"attrs": {"eps": float("inf")}}),
    ("rmsnorm eps int refused by the library", True, ("rmsnorm", [X, W]),
     {"attrs": {"eps": 1}}),
    ("rmsnorm eps bool refused by the library", True, ("rmsnorm", [X, W]),
     {"attrs": {"eps": False}}),
    ("int64 range ends", True, ("softmax", [X]), {"attrs": {"axis": -2**63}}),
    ("int64 max", True, ("softmax", [X]), {"attrs": {"axis": 2**63 - 1}}),
    ("cast str attr", True, ("cast", [X]), {"attrs": {"dtype": "f64"},
                                             "out": gpukit.empty((2, 3), np.float64,
                                                                 device="cpu")}),
    ("str attr where an int is expected", True, ("softmax", [X]), {"attrs": {"axis": "0"}}),
    ("non-ASCII str attr", True, ("softmax", [X]), {"attrs": {"axis": "ü€"}}),
    ("name with a NUL", True, ("softmax", [X]), {"attrs": {"ax\0is": 0}}),
    ("unknown attribute", True, ("softmax", [X]), {"attrs": {"axis": 0, "nope": 1}}),
    ("two outputs created", True, ("add_rmsnorm", [X, Y, W]), {"num_outputs": 2}),
    ("two outputs given", True, ("add_rmsnorm", [X, Y, W]), {"out": [OUT, OUT2]}),
    ("two outputs given as a tuple", True, ("add_rmsnorm", [X, Y, W]), {"out": (OUT, OUT2)}),
    ("num_outputs ignored with out", True, ("add", [X, Y]), {"out": OUT, "num_outputs": 7}),
    ("out empty list", True, ("add", [X, Y]), {"out": []}),
    ("too few outputs created", True, ("add_rmsnorm", [X, Y, W]), {"num_outputs": 1}),
    ("too many outputs created", True, ("add", [X, Y]), {"num_outputs": 3}),
    ("unknown op", True, ("no_such_op", [X]), {}),
    ("op with a NUL", True, ("add\0x", [X, Y]), {}),
    ("shape mismatch", True, ("add", [X, W, W]), {}),
    ("read-only out", True, ("add", [X, Y]), {"out": READ_ONLY}),
    ("every keyword", True, (), {"op": "add", "inputs": [X, Y], "attrs": None, "out": None,
                                 "num_outputs": 1, "stream": None}),
    ("int-list attr", True, ("sum", [X]), {"attrs": {"axes": [1], "keepdims": 0}}),
    ("tuple attr", True, ("sum", [X]), {"attrs": {"axes": (0,)}}),
    ("int-list attr of bools", True, ("sum", [X]), {"attrs": {"axes": [True]}}),
    ("empty int-list attr", True, ("sum", [X]), {"attrs": {"axes": []}}),
    ("int-list attr out of range", True, ("sum", [X]), {"attrs": {"axes": [5]}}),
    ("two int-list attrs", True, ("sum", [X]), {"attrs": {"axes": [0, 1], "other": (1, 2)}}),
    ("64 ints in all", True, ("sum", [X]), {"attrs": {"axes": [1], "x": list(range(63))}}),
    # handed to the Python path
    ("inputs a deque", False, ("add", deque([X, Y])), {}),
    ("inputs empty", False, ("add", []), {}),
    ("inputs not arrays", False, ("add", [X, object()]), {}),
    ("inputs a NumPy array", False, ("add", [X, np.ones((2, 3), np.float32)]), {}),
    ("inputs a GPUArray subclass", False, ("add", [SUB, Y]), {}),
    ("op not a str", False, (b"add", [X, Y]), {}),
    ("op an int", False, (7, [X, Y]), {}),
    ("65 ints in all", False, ("sum", [X]), {"attrs": {"axes": [1], "x": list(range(64))}}),
    ("int-list attr with a float", False, ("sum", [X]), {"attrs": {"axes": [1.0]}}),
    ("int-list attr with a NumPy int", False, ("sum", [X]), {"attrs": {"axes": [np.int64(1)]}}),
    ("int-list attr over int64", False, ("sum", [X]), {"attrs": {"axes": [2**63]}}),
    ("int-list attr a range", False, ("sum", [X]), {"attrs": {"axes": range(1)}}),
    ("NumPy scalar attr", False, ("rmsnorm", [X, W]), {"attrs": {"eps": np.float32(0.5)}}),
    ("NumPy int attr", False, ("softmax", [X]), {"attrs": {"axis": np.int64(-1)}}),
    ("int too large for int64", False, ("softmax", [X]), {"attrs": {"axis": 2**63}}),
    ("int too small for int64", False, ("softmax", [X]), {"attrs": {"axis": -2**63 - 1}}),
    ("lone surrogate in a str attr", False, ("softmax", [X]), {"attrs": {"axis": "\udc80"}}),
    ("lone surrogate in a name", False, ("softmax", [X]), {"attrs": {"\udc80": 1}}),
    ("lone surrogate in op", False, ("\udc80", [X]), {}),
    ("name not a str", False, ("softmax", [X]), {"attrs": {1: 2}}),
    ("object attr", False, ("softmax", [X]), {"attrs": {"axis": object()}}),
    ("attrs a list", False, ("softmax", [X]), {"attrs": [("axis", 1)]}),
    ("attrs falsy but not a dict", False, ("softmax", [X]), {"attrs": ()}),
    ("attrs a dict subclass", False, ("softmax", [X]),
     {"attrs": type("D", (dict,), {})(axis=-1)}),
    ("out an object", False, ("add", [X, Y]), {"out": object()}),
    ("out a list with an object", False, ("add", [X, Y]), {"out": [OUT, object()]}),
    ("num_outputs 0", False, ("add", [X, Y]), {"num_outputs": 0}),
    ("num_outputs a str", False, ("add", [X, Y]), {"num_outputs": "1"}),
    ("num_outputs a bool", False, ("add", [X, Y]), {"num_outputs": True}),
    ("num_outputs too large", False, ("add", [X, Y]), {"num_outputs": 17}),
    ("stream not a Stream", False, ("add", [X, Y]), {"stream": "s"}),
    ("17 attributes", False, ("softmax", [X]), {"attrs": {f"a{i}": i for i in range(17)}}),
    ("33 inputs", False, ("add", [X] * 33), {}),
    ("unknown keyword", False, ("add", [X, Y]), {"nope": 1}),
    ("keyword given twice", False, ("add", [X, Y], None), {"attrs": {}}),
    ("too many positional", False, ("add", [X, Y], None, None, 1, None, 0), {}),
    ("inputs missing", False, ("add",), {}),
    ("nothing", False, (), {}),
]


@pytest.mark.parametrize("name,served,args,kwargs", CASES, ids=[c[0] for c in CASES])
def test_both_implementations_give_the_same_result_or_error(name, served, args, kwargs):
    expected = outcome(lambda: _array._call_python(*args, **kwargs))
    if COMPILED is None:
        pytest.skip(f"gpukit._compiled_call not in use: {_call_path.REASON}")
    before = counts()
    got = outcome(lambda: COMPILED.call(*args, **kwargs))
    after = counts()
    if expected[0] != "raised":
        # New outputs are new objects: compare them by value; outputs given by identity.
        fresh = kwargs.get("out", args[3] if len(args) > 3 else None) is None
        if fresh:
            expected, got = expected[:-1], got[:-1]
    assert got == expected
    if served:
        assert after == (before[0] + 1, before[1]), "handed to the Python path"
    else:
        assert after == (before[0], before[1] + 1), "served by the compiled path"


def test_a_str_attribute_reaches_the_op(impl):
    x = arr(2, 2)
    out = impl("cast", [x], {"dtype": "f64"}, gpukit.empty((2, 2), np.float64, device="cpu"))
    np.testing.assert_array_equal(out.to_numpy(), x.to_numpy().astype(np.float64))
    with pytest.raises(gpukit.InvalidArgument):
        impl("cast", [x], {"dtype": "f64"}, gpukit.empty((2, 2), np.int32, device="cpu"))


def test_created_outputs_are_arrays_like_the_python_ones(impl):
    x = arr(3, 4)
    r = impl("softmax", [x], {"axis": -1})
    assert type(r) is gpukit.GPUArray and r._rt is x._rt and r._device is x._device
    assert r._stream is None and ffi.typeof(r._t) is ffi.typeof("gk_tensor*")
    with pytest.raises(AttributeError):
        object.__getattribute__(r, "_meta")  # the descriptor is read on first use
    assert r.shape == (3, 4) and r.dtype == np.float32
    s = np.exp(x.to_numpy())
    np.testing.assert_allclose(r.to_numpy(), s / s.sum(-1, keepdims=True), rtol=1e-6)
    out, total = impl("add_rmsnorm", [x, x, arr(4)], num_outputs=2)
    np.testing.assert_allclose(total.to_numpy(), 2 * x.to_numpy(), rtol=1e-6)


# ---- streams ----------------------------------------------------------------------------------

def test_an_explicit_stream_is_used_and_recorded(impl, dev):
    x = gpukit.full((8,), 1.0, np.float32, device=dev)
    t = gpukit.task("explicit", qos="best_effort", device=dev)
    r = impl("add", [x, x], stream=t.stream)
    assert r._stream is t.stream and t.info()["ops_launched"] == 1
    out = gpukit.empty((8,), device=dev)
    assert impl("add", [x, x], out=out, stream=t.stream) is out and out._stream is t.stream
    assert t.info()["ops_launched"] == 2
    impl("add", [x, x], out=out)  # the default stream again
    assert out._stream is None and t.info()["ops_launched"] == 2


def test_the_task_stream_serves_its_device_only(impl, dev):
    x = gpukit.full((8,), 1.0, np.float32, device=dev)
    other = gpukit.full((8,), 1.0, np.float32, device="cpu")  # the default runtime's
    with gpukit.task("block", qos="burstable", memory="1MiB", device=dev) as t:
        r = impl("add", [x, x])
        assert r._stream is t.stream and t.info()["ops_launched"] == 1
        s = impl("add", [other, other])  # another device: its default stream
        assert s._stream is None and t.info()["ops_launched"] == 1
        out = gpukit.empty((8,), device=dev)
        impl("add", [x, x], out=[out])
        assert out._stream is t.stream and t.info()["ops_launched"] == 2
    r = impl("add", [x, x])
    assert r._stream is None and t.info()["ops_launched"] == 2


def test_a_stream_of_another_kind_of_object_goes_to_the_python_path(dev):
    if COMPILED is None:
        pytest.skip(f"gpukit._compiled_call not in use: {_call_path.REASON}")
    x = gpukit.full((8,), 1.0, np.float32, device=dev)

    class FakeStream:
        ptr = ffi.NULL

    before = counts()
    for impl in IMPLS.values():
        assert impl("add", [x, x], stream=FakeStream()).to_numpy().tolist() == [2.0] * 8
    assert counts()[1] == before[1] + 1


# ---- threads, references, memory ------------------------------------------------------------

def test_many_threads_calling_at_once_get_their_own_results(impl):
    errors = []
    barrier = threading.Barrier(8)

    def work(k):
        try:
            x = gpukit.full((k + 1, 4), float(k), np.float32, device="cpu")
            out = gpukit.empty((k + 1, 4), device="cpu")
            barrier.wait()
            for i in range(300):
                if i % 2:
                    r = impl("add", [x, x])
                else:
                    r = impl("add", [x, x], attrs={}, out=[out])
                np.testing.assert_array_equal(r.to_numpy(), np.full((k + 1, 4), 2.0 * k))
                r = impl("rmsnorm", [x], attrs={"eps": float(k)})
                assert r.shape == (k + 1, 4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_ten_thousand_calls_keep_no_references_and_no_memory(impl, dev):
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
        for i in range(n):
            impl(op, [x, w], attrs=attrs, out=out)
            impl(op, [x, w], attrs, None, 1, stream)
            impl("cast", [x], {"dtype": mode, "unused": None})
            try:
                impl(op, [x, w], attrs={name: 1}, out=out)  # refused by the library
            except gpukit.InvalidArgument:
                pass
            impl("sum", [x], attrs={"axes": [0]})  # the Python path

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


# ---- the self-check --------------------------------------------------------------------------

@needs_compiled
def test_the_layout_check_reads_the_binding_cdata_and_refuses_anything_else():
    probes = _call_path.cdata_probes()
    types = COMPILED.check_cdata_layout(probes)
    assert types and all(t.__module__ == "_cffi_backend" for t in types)
    assert type(ffi.cast("gk_tensor*", 1)) in types and type(X._t) in types
    tensor_t = ffi.typeof("gk_tensor*")

    class Lookalike:  # PyObject_HEAD and two pointers, like a cdata
        __slots__ = ("c_type", "c_data")

    fake = Lookalike()
    fake.c_type, fake.c_data = tensor_t, X
    for bad in ([(object(), tensor_t, 0x1234)],
                [(7, tensor_t, 7)],
                [(fake, tensor_t, 0x1234)],
                [(ffi.cast("gk_tensor*", 5), ffi.typeof("gk_stream*"), 5)],
                [(ffi.cast("gk_tensor*", 5), tensor_t, 6)],
                probes + [(b"bytes", tensor_t, 0)]):
        with pytest.raises(ValueError, match="does not read back"):
            COMPILED.check_cdata_layout(bad)
    # An object of a type the check did not record is never read, even one laid out like a
    # cdata of the right ctype (its "address" here is an object's): the Python path decides.
    fake.c_data = object()
    g = object.__new__(gpukit.GPUArray)
    g._rt, g._device, g._stream, g._t = X._rt, X._device, None, fake
    try:
        before = counts()
        expected = outcome(lambda: _array._call_python("add", [g, g]))
        assert outcome(lambda: COMPILED.call("add", [g, g])) == expected
        assert expected[0] == "raised" and counts()[1] == before[1] + 1
    finally:
        del g._t


@needs_compiled
def test_a_failed_self_check_keeps_the_python_implementation(tmp_path, monkeypatch, caplog):
    # A copy of the extension under another path is a module of its own (its own state).
    copy = tmp_path / "lib" / "gpukit" / "python" / _call_path.FILE_NAME
    copy.parent.mkdir(parents=True)
    shutil.copy(COMPILED.__file__, copy)
    monkeypatch.setattr(_call_path, "candidates", lambda: [str(copy)])
    monkeypatch.setattr(_call_path, "cdata_probes",
                        lambda: [(object(), ffi.typeof("gk_tensor*"), 0x1234)])
    for name in ("ACTIVE", "REASON", "module"):
        monkeypatch.setattr(_call_path, name, getattr(_call_path, name))
    monkeypatch.delitem(sys.modules, _call_path.MODULE_NAME)
    with caplog.at_level("DEBUG", logger="gpukit"):
        chosen = _call_path.choose(_array._call_python, gpukit.GPUArray)
    assert chosen is _array._call_python
    assert "ValueError" in _call_path.REASON and "does not read back" in _call_path.REASON
    assert any("Python implementation" in r.getMessage() for r in caplog.records)
    fresh = sys.modules.get(_call_path.MODULE_NAME)
    assert fresh is None  # registered only once initialised


@needs_compiled
def test_a_second_copy_binds_to_the_same_library_and_serves_calls(tmp_path):
    copy = tmp_path / _call_path.FILE_NAME
    shutil.copy(COMPILED.__file__, copy)
    mod = _call_path._load_extension(str(copy))
    assert mod is not COMPILED
    with pytest.raises(RuntimeError, match="not initialised"):
        mod.call("add", [X, Y])
    _call_path.init(mod, gpukit.GPUArray, _array._call_python)
    np.testing.assert_array_equal(mod.call("add", [X, Y]).to_numpy(),
                                  X.to_numpy() + Y.to_numpy())
    assert mod.counts() == (1, 0)
    with pytest.raises(RuntimeError, match="initialised already"):
        _call_path.init(mod, gpukit.GPUArray, _array._call_python)
