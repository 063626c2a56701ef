"""Ops on arrays: GPUArray's operators (+ - * / @, comparisons, in-place), reductions,
softmax and the dtype conversions and copies that run op "cast", and the functions of the
same ops (gpukit.add, matmul, sum, …).

The methods run gpukit.call, which returns GPUArrays, so they cannot be written in the class
body (_array.py) without an import cycle: they are written in _ArrayOps below and installed
on GPUArray when this module is imported (gpukit's __init__ does), as plain functions: a
method call costs what it did in the class body.
"""
from __future__ import annotations

import numbers
import types

import numpy as np

from ._array import GPUArray
from ._call import call
from ._creation import _copy_tensor, _from_host, _scalar, asarray
from ._dtypes import (_BF16, _CASTABLE, _FLOATING, _GK_NAMES, _NP_TO_GK, _PACKED, _gk_dtype,
                      _np_dtype, _packed_error)
from ._lib import lib
from .errors import InvalidArgument

__all__ = ["matmul", "softmax", "add", "subtract", "multiply", "divide", "negative",
           "absolute", "equal", "not_equal", "less", "less_equal", "greater",
           "greater_equal", "sum", "mean", "max", "min"]

_OP_SIGN = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


class _ArrayOps:
    """GPUArray's methods that run ops; installed on GPUArray below (see the module's
    docstring). Never instantiated."""

    __slots__ = ()

    # -- copies, dtypes ---------------------------------------------------------------
    def _contiguous(self) -> "GPUArray":
        """A contiguous copy: op "cast" to the same dtype where cast serves the dtype
        (f32 f64 f16 bf16 i32 i64); otherwise through the host (i8 i16 u8 bool)."""
        if self._gk_dtype in _CASTABLE:
            return call("cast", [self], {"dtype": _GK_NAMES[self._gk_dtype]})
        host = self._host_strided()
        return _from_host(host, self._device, self._gk_dtype)

    def copy(self) -> "GPUArray":
        return self._contiguous() if self._gk_dtype in _CASTABLE or not self.is_contiguous \
            else _copy_tensor(self)

    def astype(self, dtype, copy: bool = True) -> "GPUArray":
        """Converts with op "cast" (f32 f64 f16 bf16 i32 i64 in any pair); other pairs
        go through NumPy on the host."""
        target = _gk_dtype(dtype)
        if self._gk_dtype in _PACKED:
            raise _packed_error(self._gk_dtype, "astype")
        if target == self._gk_dtype and not copy:
            return self
        if self._gk_dtype in _CASTABLE and target in _CASTABLE:
            return call("cast", [self], {"dtype": _GK_NAMES[target]})
        host = self._host_strided().astype(_np_dtype(target))
        return _from_host(host, self._device, target)

    # -- operators ---------------------------------------------------------------------
    def _binary(self, other, op: str, reflected: bool = False, out=None):
        if (type(other) is GPUArray and other._device is self._device
                and other._gk_dtype == self._gk_dtype
                and (op != "div" or self._gk_dtype in _FLOATING)):
            a, b = self, other  # nothing for _coerce_pair to do
        else:
            a, b = _coerce_pair(self, other, true_divide=(op == "div"))
        if reflected:
            a, b = b, a
        return call(op, [a, b], None, out)

    def __add__(self, o): return self._binary(o, "add")
    def __radd__(self, o): return self._binary(o, "add", True)
    def __sub__(self, o): return self._binary(o, "sub")
    def __rsub__(self, o): return self._binary(o, "sub", True)
    def __mul__(self, o): return self._binary(o, "mul")
    def __rmul__(self, o): return self._binary(o, "mul", True)
    def __truediv__(self, o): return self._binary(o, "div")
    def __rtruediv__(self, o): return self._binary(o, "div", True)

    # Comparisons: elementwise, a bool array. `3 < x` comes here as x > 3 (Python reflects
    # comparisons), and a NumPy array on the left defers to us (__array_priority__).
    def _compare(self, other, op: str, out=None):
        if not _comparable(other):
            return NotImplemented
        if (type(other) is GPUArray and other._device is self._device
                and other._gk_dtype == self._gk_dtype):
            a, b = self, other
        else:
            a, b = _coerce_pair(self, other)
        if a._gk_dtype == 10 and op not in ("eq", "ne"):
            # bool orders as False < True: compared as u8 (0, 1).
            a, b = a.astype(np.uint8), b.astype(np.uint8)
        return call(op, [a, b], None, out)

    def __eq__(self, o): return self._compare(o, "eq")
    def __ne__(self, o): return self._compare(o, "ne")
    def __lt__(self, o): return self._compare(o, "lt")
    def __le__(self, o): return self._compare(o, "le")
    def __gt__(self, o): return self._compare(o, "gt")
    def __ge__(self, o): return self._compare(o, "ge")

    # In-place operators write into this array (op with out=self), so NumPy or PyTorch
    # memory it views changes, as `a += b` does in NumPy. Refused, as NumPy refuses, when
    # the result's dtype cannot be stored in this one under same-kind casting (int += float)
    # or the broadcast shape is not this array's shape.
    def _inplace(self, other, op: str):
        if self._flags & lib.GK_TENSOR_READ_ONLY:
            # Refused before any work (the C call would refuse the output as well).
            raise InvalidArgument(f"{op} in place: the array is read-only (a weight, or "
                                  "memory imported read-only); compute into a new array "
                                  f"(x = x {_OP_SIGN.get(op, op)} y) or copy it first (x.copy())")
        if isinstance(other, (GPUArray, np.ndarray, numbers.Number, np.generic)):
            a, b = _coerce_pair(self, other, true_divide=(op == "div"))
        else:
            a, b = _coerce_pair(self, asarray(other, device=self._device),
                                true_divide=(op == "div"))
        shape = _broadcast_shapes(a._shape, b._shape, op)
        if shape != self._shape:
            raise ValueError(f"non-broadcastable output operand with shape {self._shape} "
                             f"doesn't match the broadcast shape {shape} ({op} in place)")
        if b is not self and _overlaps(b, self):
            b = b.copy()  # `a += a.T`: the op would read elements it already wrote
        if a._gk_dtype == self._gk_dtype:
            call(op, [a, b], None, self)
            return self
        result, target = a._gk_dtype, self._gk_dtype
        same_kind = (result in _FLOATING and target in _FLOATING) or (
            result not in _FLOATING and target not in _FLOATING and np.can_cast(
                _np_dtype(result), _np_dtype(target), casting="same_kind"))
        if not same_kind:
            raise TypeError(f"cannot store the result of {op} in place: its dtype "
                            f"{_GK_NAMES[result]} cannot be cast to this array's dtype "
                            f"{_GK_NAMES[target]} with casting rule 'same_kind'")
        if result in _CASTABLE and target in _CASTABLE:
            # Computed in the result dtype, then rounded into this array, as NumPy does.
            call("cast", [call(op, [a, b])], {"dtype": _GK_NAMES[target]}, self)
        else:
            # Integers of another width: add, sub and mul wrap modulo 2**bits, so computing
            # in this array's dtype gives the values of computing wider and wrapping.
            call(op, [self, b.astype(_np_dtype(target))], None, self)
        return self

    def __iadd__(self, o): return self._inplace(o, "add")
    def __isub__(self, o): return self._inplace(o, "sub")
    def __imul__(self, o): return self._inplace(o, "mul")
    def __itruediv__(self, o): return self._inplace(o, "div")

    def __neg__(self):
        return call("neg", [self])

    def __pos__(self):
        return self

    def __abs__(self):
        return call("abs", [self])

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(asarray(other, device=self._device), self)

    # -- reductions ----------------------------------------------------------------------
    def _reduce(self, op: str, axis=None, keepdims=False):
        attrs = {"keepdims": int(bool(keepdims))}
        if axis is not None:
            attrs["axes"] = [axis] if isinstance(axis, numbers.Integral) else list(axis)
        return call(op, [self], attrs)

    def sum(self, axis=None, keepdims=False):
        return self._reduce("sum", axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        x = self if self._gk_dtype in _FLOATING else self.astype(np.float64)
        return x._reduce("mean", axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return self._reduce("max", axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return self._reduce("min", axis, keepdims)

    def softmax(self, axis=-1):
        return call("softmax", [self], {"axis": int(axis)})


for _name, _method in list(vars(_ArrayOps).items()):
    if isinstance(_method, types.FunctionType):
        _method.__qualname__ = f"GPUArray.{_name}"
        setattr(GPUArray, _name, _method)
del _name, _method


def _coerce_pair(a: GPUArray, other, true_divide=False):
    if isinstance(other, GPUArray):
        b = other
    elif isinstance(other, (numbers.Number, np.generic)) and not isinstance(other, np.ndarray):
        dt = np.result_type(a.dtype if a._gk_dtype != 4 or _BF16 is not None else np.float32,
                            other)
        if a._gk_dtype == 4:
            dt = _BF16 if _BF16 is not None and np.issubdtype(dt, np.floating) else dt
        b = _scalar(other, dt if dt in _NP_TO_GK else a.dtype, a._device)
    else:
        b = asarray(other, device=a._device)
    if b._device is not a._device and b._device != a._device:
        raise ValueError(f"operands are on different devices: {a._device} and {b._device}")
    if a._gk_dtype != b._gk_dtype:
        target = _gk_dtype(np.result_type(a.dtype, b.dtype))
        a = a if a._gk_dtype == target else a.astype(_np_dtype(target))
        b = b if b._gk_dtype == target else b.astype(_np_dtype(target))
    if true_divide and a._gk_dtype not in _FLOATING:
        a, b = a.astype(np.float64), b.astype(np.float64)
    return a, b


def _comparable(other) -> bool:
    """Whether a comparison with `other` is elementwise: arrays, numbers, sequences and
    DLPack producers are; anything else (None, a str, an object) compares as Python does."""
    return isinstance(other, (GPUArray, np.ndarray, numbers.Number, np.generic, list, tuple)) \
        or hasattr(other, "__dlpack__")


def _byte_range(x: GPUArray) -> tuple:
    """[first, last] byte address the elements of `x` occupy."""
    lo = hi = x.data_ptr
    size = x.itemsize
    for n, st in zip(x._shape, x._strides):
        if n == 0:
            return (0, -1)
        step = (n - 1) * st * size
        lo, hi = (lo + step, hi) if step < 0 else (lo, hi + step)
    return (lo, hi + size - 1)


def _overlaps(x: GPUArray, y: GPUArray) -> bool:
    """Whether two arrays on one device may share memory, other than elementwise (the same
    view of the same memory, where reading and writing one element at a time is safe)."""
    if x._device is not y._device and x._device != y._device:
        return False
    if x.data_ptr == y.data_ptr and x._shape == y._shape and x._strides == y._strides:
        return False
    (a0, a1), (b0, b1) = _byte_range(x), _byte_range(y)
    return a0 <= b1 and b0 <= a1


def _broadcast_shapes(a: tuple, b: tuple, op: str) -> tuple:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise ValueError(f"{op}: shapes {a} and {b} do not broadcast") from None


# -- functions -------------------------------------------------------------------------------
def _as(x, like: GPUArray | None = None) -> GPUArray:
    if isinstance(x, GPUArray):
        return x
    return asarray(x, device=like.device if like is not None else None)


def add(a, b, out=None):
    return _as(a)._binary(b, "add", out=out)


def subtract(a, b, out=None):
    return _as(a)._binary(b, "sub", out=out)


def multiply(a, b, out=None):
    return _as(a)._binary(b, "mul", out=out)


def divide(a, b, out=None):
    return _as(a)._binary(b, "div", out=out)


def equal(a, b, out=None):
    """a == b elementwise (NumPy broadcasting): a bool array, or written into `out`."""
    return _compare_function(a, b, "eq", out)


def not_equal(a, b, out=None):
    return _compare_function(a, b, "ne", out)


def less(a, b, out=None):
    return _compare_function(a, b, "lt", out)


def less_equal(a, b, out=None):
    return _compare_function(a, b, "le", out)


def greater(a, b, out=None):
    return _compare_function(a, b, "gt", out)


def greater_equal(a, b, out=None):
    return _compare_function(a, b, "ge", out)


def _compare_function(a, b, op: str, out):
    a = _as(a)
    r = a._compare(b, op, out)
    if r is NotImplemented:
        raise TypeError(f"{op}: cannot compare a GPUArray with a {type(b).__name__}")
    return r


def negative(x, out=None):
    return call("neg", [_as(x)], out=out)


def absolute(x, out=None):
    return call("abs", [_as(x)], out=out)


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return _as(x).sum(axis, keepdims)


def mean(x, axis=None, keepdims=False):
    return _as(x).mean(axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return _as(x).max(axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    return _as(x).min(axis, keepdims)


def softmax(x, axis=-1):
    return _as(x).softmax(axis)


def matmul(a, b, out=None):
    """NumPy matmul: 1-D operands are promoted to [1, K] / [K, 1] and the added axis is
    dropped from the result."""
    a = _as(a)
    b = _as(b, like=a)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must have at least one dimension (use * for scalars)")
    if a._gk_dtype != b._gk_dtype:
        a, b = _coerce_pair(a, b)
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = a.reshape(1, a.shape[0])
    if squeeze_b:
        b = b.reshape(b.shape[0], 1)
    r = call("matmul", [a, b], out=out)
    if squeeze_a or squeeze_b:
        shape = list(r.shape)
        if squeeze_b:
            shape.pop(-1)
        if squeeze_a:
            shape.pop(-2 if not squeeze_b else -1)
        r = r.reshape(tuple(shape))
    return r
