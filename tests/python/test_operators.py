"""Comparison operators and in-place operators of GPUArray against NumPy (cpu device)."""
import operator

import numpy as np
import pytest

import gpukit

rng = np.random.default_rng(77)

COMPARISONS = [(operator.eq, "equal"), (operator.ne, "not_equal"), (operator.lt, "less"),
               (operator.le, "less_equal"), (operator.gt, "greater"),
               (operator.ge, "greater_equal")]
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8]


def small_ints(shape, dtype):
    """Values in [0, 4): many ties, so == and <= differ from < on most elements."""
    return rng.integers(0, 4, shape).astype(dtype)


# ---- comparisons ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op,name", COMPARISONS, ids=[n for _, n in COMPARISONS])
def test_comparisons_are_elementwise_bool_arrays_with_broadcasting(op, name, dtype):
    for sa, sb in [((2, 3), (2, 3)), ((4, 1, 5), (3, 1)), ((), (2, 2)), ((0, 3), (3,))]:
        a, b = small_ints(sa, dtype), small_ints(sb, dtype)
        ga, gb = gpukit.asarray(a), gpukit.asarray(b)
        want = op(a, b)
        for got in (op(ga, gb), getattr(gpukit, name)(ga, gb), getattr(gpukit, name)(a, gb)):
            assert isinstance(got, gpukit.GPUArray)
            assert got.dtype == np.bool_ and got.shape == want.shape
            np.testing.assert_array_equal(got.to_numpy(), want)


@pytest.mark.parametrize("op,name", COMPARISONS, ids=[n for _, n in COMPARISONS])
def test_comparisons_take_scalars_numpy_arrays_and_lists_on_either_side(op, name):
    a = np.array([[0.5, 1.0, 2.0], [3.0, 1.0, -1.0]], np.float32)
    g = gpukit.asarray(a)
    for other in (1.0, 1, np.float32(2.0), np.int64(3), np.array([1.0, 1.0, 2.0], np.float32),
                  [1.0, 2.0, 2.0]):
        np.testing.assert_array_equal(op(g, other).to_numpy(), op(a, np.asarray(other)))
        got = op(other, g)  # reflected by Python, or deferred to by NumPy
        assert isinstance(got, gpukit.GPUArray), type(got)
        np.testing.assert_array_equal(got.to_numpy(), op(np.asarray(other), a))


def test_comparisons_follow_numpy_for_nan_mixed_dtypes_and_bool():
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0], np.float32)
    b = np.array([np.nan, np.nan, np.inf, 1.0, -0.0], np.float32)
    ga, gb = gpukit.asarray(a), gpukit.asarray(b)
    for op, _ in COMPARISONS:
        np.testing.assert_array_equal(op(ga, gb).to_numpy(), op(a, b))
    # Mixed dtypes promote first: 2 < 2.5 in float64, not 2 < 2 after truncating 2.5.
    i = np.array([1, 2, 3], np.int32)
    np.testing.assert_array_equal((gpukit.asarray(i) < 2.5).to_numpy(), i < 2.5)
    np.testing.assert_array_equal(
        (gpukit.asarray(i) == gpukit.asarray(i.astype(np.int64))).to_numpy(), [True] * 3)
    # int64 compares exactly, past the 2**53 that float64 holds.
    big = np.array([2**62, 2**62 + 1], np.int64)
    np.testing.assert_array_equal((gpukit.asarray(big) == 2**62).to_numpy(), [True, False])
    np.testing.assert_array_equal((gpukit.asarray(big) > 2**62).to_numpy(), [False, True])
    # bool: eq/ne directly, ordering as False < True.
    t = np.array([True, False, True, False])
    u = np.array([True, True, False, False])
    for op, _ in COMPARISONS:
        np.testing.assert_array_equal(op(gpukit.asarray(t), gpukit.asarray(u)).to_numpy(),
                                      op(t, u))


def test_comparison_ops_through_gpukit_call_write_bool_outputs():
    a, b = small_ints((3, 4), np.int32), small_ints((4,), np.int32)
    out = gpukit.empty((3, 4), dtype=np.bool_, device="cpu")
    r = gpukit.call("le", [gpukit.asarray(a), gpukit.asarray(b)], out=out)
    assert r is out
    np.testing.assert_array_equal(out.to_numpy(), a <= b)
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert op in gpukit.ops()
    with pytest.raises(gpukit.InvalidArgument, match="dtype"):
        gpukit.call("lt", [gpukit.asarray(np.array([True])), gpukit.asarray(np.array([False]))])
    with pytest.raises(gpukit.InvalidArgument, match="output 'out'"):
        gpukit.call("eq", [gpukit.asarray(a), gpukit.asarray(a)],
                    out=gpukit.empty((3, 4), dtype=np.int32, device="cpu"))


def test_arrays_are_unhashable_and_eq_with_other_objects_is_python_identity():
    g = gpukit.asarray(np.arange(3, dtype=np.float32))
    with pytest.raises(TypeError, match="unhashable"):
        hash(g)
    assert (g == None) is False  # noqa: E711
    assert (g != "abc") is True
    with pytest.raises(TypeError):
        g < "abc"  # noqa: B015
    with pytest.raises(TypeError, match="cannot compare"):
        gpukit.less(g, object())
    with pytest.raises(ValueError):
        bool(g == g)  # ambiguous, as for NumPy arrays
    assert bool(g[:1] == g[:1])


# ---- in-place operators ------------------------------------------------------------------

INPLACE = [(operator.iadd, "+="), (operator.isub, "-="), (operator.imul, "*="),
           (operator.itruediv, "/=")]


@pytest.mark.parametrize("op,label", INPLACE, ids=[lbl for _, lbl in INPLACE])
def test_in_place_operators_write_into_the_numpy_memory_the_array_views(op, label):
    base = rng.standard_normal((3, 4)).astype(np.float32)
    host = base.copy()
    g = gpukit.asarray(host)  # zero copy: g views host's memory
    other = rng.uniform(0.5, 2.0, (4,)).astype(np.float32)
    ident = id(g)
    g2 = op(g, gpukit.asarray(other))
    assert g2 is g and id(g) == ident
    want = op(base.copy(), other)
    np.testing.assert_allclose(host, want, rtol=1e-6)  # NumPy's memory changed
    np.testing.assert_allclose(g.to_numpy(), want, rtol=1e-6)
    g = op(g, 2)  # a scalar
    np.testing.assert_allclose(host, op(want.copy(), 2), rtol=1e-6)


def test_in_place_on_views_and_numpy_operands():
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    g = gpukit.asarray(host)
    view = g[:, 1::2]  # a strided view of host
    view += np.array([10.0, 100.0])
    want = np.arange(12, dtype=np.float64).reshape(3, 4)
    want[:, 1::2] += [10.0, 100.0]
    np.testing.assert_array_equal(host, want)


def test_in_place_casts_a_wider_result_of_the_same_kind_as_numpy_does():
    cases = [
        (np.float32, np.arange(4, dtype=np.float64) / 3),   # f64 result into f32
        (np.float16, np.full(4, 0.1, np.float32)),         # f32 result into f16
        (np.int32, np.array([2**40 + 5, -1, 7, 2**33], np.int64)),  # wraps as NumPy does
        (np.int8, np.array([300, -200, 5, 127], np.int16)),         # via i8 arithmetic
        (np.uint8, np.array([250, 7, 1, 0], np.uint8)),
    ]
    for dtype, other in cases:
        for op, _ in INPLACE[:3]:
            base = np.array([1, 2, 3, 100], dtype)
            host, want = base.copy(), base.copy()
            g = gpukit.asarray(host)
            op(g, gpukit.asarray(other))
            with np.errstate(over="ignore"):
                op(want, other)
            np.testing.assert_allclose(host.astype(np.float64), want.astype(np.float64),
                                       rtol=1e-3 if dtype == np.float16 else 1e-6,
                                       err_msg=f"{np.dtype(dtype).name} {op.__name__}")


def test_in_place_refuses_results_that_do_not_fit_the_array():
    i = gpukit.asarray(np.zeros(4, np.int32))
    with pytest.raises(TypeError, match="f64 cannot be cast to this array's dtype i32"):
        i += 1.5
    with pytest.raises(TypeError, match="same_kind"):
        i /= 2  # true division of integers is float64
    with pytest.raises(TypeError, match="same_kind"):
        i += gpukit.asarray(np.ones(4, np.float32))
    u = gpukit.asarray(np.zeros(4, np.uint8))
    with pytest.raises(TypeError, match="i64 cannot be cast to this array's dtype u8"):
        u += np.ones(4, np.int64)
    f = gpukit.asarray(np.zeros((4,), np.float32))
    with pytest.raises(ValueError, match=r"shape \(4,\) doesn't match the broadcast shape "
                                         r"\(2, 4\)"):
        f += np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match="do not broadcast"):
        f *= np.ones(3, np.float32)
    np.testing.assert_array_equal(i.to_numpy(), np.zeros(4))  # nothing was written
    np.testing.assert_array_equal(f.to_numpy(), np.zeros(4))


def test_in_place_with_an_overlapping_operand_reads_it_before_writing():
    host = np.arange(9, dtype=np.float32).reshape(3, 3)
    g = gpukit.asarray(host)
    g += g.T
    np.testing.assert_array_equal(host, np.arange(9).reshape(3, 3) + np.arange(9).reshape(3, 3).T)
    v = np.arange(6, dtype=np.float32)
    gv = gpukit.asarray(v)
    tail = gv[1:]
    tail += gv[:5]
    want = np.arange(6, dtype=np.float32)
    want[1:] += want[:5].copy()
    np.testing.assert_array_equal(v, want)
    g -= g  # the same view: elementwise, no copy needed
    np.testing.assert_array_equal(host, np.zeros((3, 3)))


def test_in_place_into_a_read_only_array_is_refused():
    host = np.ones(3, np.float32)
    host.flags.writeable = False
    g = gpukit.asarray(host)
    with pytest.raises(gpukit.InvalidArgument, match="read-only"):
        g += 1
    np.testing.assert_array_equal(host, np.ones(3))
