"""The op call: gpukit.call, behind every named function and operator.

Every op is one C call: gk_op_call_alloc, which creates the outputs and runs the op, or
gk_op_call when the caller gives `out`. Attributes are encoded into gk_attr arrays, and
the gk_op_args of each (inputs, outputs, attributes) combination is kept for reuse.
"""
from __future__ import annotations

import builtins as _b
import numbers

import numpy as np

from ._array import GPUArray
from ._dtypes import _SZ_GK_TENSOR_DESC, _T_GK_TENSOR_DESC
from ._lib import check, ffi, lib
from ._runtime import Runtime, _current_stream, _open_task_streams
from .errors import InvalidArgument

__all__ = ["call"]

_T_CHAR = ffi.typeof("char[]")
_T_GK_ATTR = ffi.typeof("gk_attr[]")
_T_GK_OP_ARGS = ffi.typeof("gk_op_args*")
_T_GK_TENSOR_ARRAY = ffi.typeof("gk_tensor*[]")
_T_INT64_T = ffi.typeof("int64_t[]")
_SZ_GK_OP_ARGS = ffi.sizeof("gk_op_args")
_NULL = ffi.NULL
# cffi's backend entry point: ffi.new is a Python wrapper around it (one Python call each on
# the hot paths below).
_newp = ffi._backend.newp
_new_object = object.__new__
_current_stream_get = _current_stream.get


def _attrs(attrs: dict):
    """A gk_attr array for a dict: int/bool → INT, float → FLOAT, str → STRING,
    sequence of ints → INTS. Returns (array, count, keepalive)."""
    keep = []
    items = [(k, v) for k, v in attrs.items() if v is not None]
    arr = ffi.new(_T_GK_ATTR, _b.max(len(items), 1))
    for i, (name, value) in enumerate(items):
        keep.append(ffi.new(_T_CHAR, name.encode()))
        arr[i].name = keep[-1]
        if isinstance(value, (bool, np.bool_, numbers.Integral)):
            arr[i].type = lib.GK_ATTR_INT
            arr[i].value.i = int(value)
        elif isinstance(value, numbers.Real):
            arr[i].type = lib.GK_ATTR_FLOAT
            arr[i].value.f = float(value)
        elif isinstance(value, str):
            arr[i].type = lib.GK_ATTR_STRING
            keep.append(ffi.new(_T_CHAR, value.encode()))
            arr[i].value.s = keep[-1]
        else:
            ints = [int(v) for v in value]
            arr[i].type = lib.GK_ATTR_INTS
            arr[i].count = len(ints)
            keep.append(ffi.new(_T_INT64_T, _b.max(len(ints), 1)))
            for j, v in enumerate(ints):
                keep[-1][j] = v
            arr[i].value.ints = keep[-1]
    return arr, len(items), keep


def _op_args(inputs, attrs, stream, num_outputs: int = 0):
    """A gk_op_args for `inputs` with room for `num_outputs` output pointers after them
    (args.outputs, filled by the caller). Returns (args, tensors, keepalive)."""
    n = len(inputs)
    tensors = ffi.new(_T_GK_TENSOR_ARRAY, n + num_outputs)
    tensors[0:n] = [x._t for x in inputs]
    # Initialised in one call (struct_size, inputs, num_inputs, outputs, num_outputs; the
    # rest zero): each field set from Python would cost a call of its own.
    args = ffi.new(_T_GK_OP_ARGS, [_SZ_GK_OP_ARGS, tensors, n, tensors + n, num_outputs])
    keep = None
    if attrs:  # no attributes: attrs stays NULL, which gk_op_args allows for num_attrs 0
        attr_arr, count, keep = _attrs(attrs)
        args.attrs = attr_arr
        args.num_attrs = count
        keep = (attr_arr, keep)
    if stream is not None:
        args.stream = stream.ptr
    return args, tensors, keep


def _output_descs(rt: Runtime, name: str, inputs, attrs, count: int = 1):
    args, _tensors, _keep = _op_args(inputs, attrs, None)
    out = []
    for i in range(count):
        d = ffi.new(_T_GK_TENSOR_DESC)
        d.struct_size = _SZ_GK_TENSOR_DESC
        check(lib.gk_op_output_desc(rt.ptr, name.encode(), args, i, d))
        out.append(d)
    return out


# The attribute values whose encoding _attrs_key can name: hashable, and equal only where
# they encode the same (the key holds each value's type too, so 1, 1.0 and True differ).
_KEYED_ATTR_TYPES = frozenset((int, bool, float, str, type(None)))


def _attrs_key(attrs: dict):
    """A hashable key naming `attrs` exactly as _attrs would encode it (names, order, value
    types and values), or None where no key can (then the call encodes them afresh):
    other value types, or a float that equals another float it differs from (0.0 and
    -0.0) or that equals nothing (NaN)."""
    key = []
    for name, value in attrs.items():
        t = type(value)
        if type(name) is not str:
            return None
        if t is float:
            if value == 0.0 or value != value:
                return None
        elif t is list or t is tuple:
            for v in value:
                if type(v) is not int:
                    return None
            value = tuple(value)
        elif t not in _KEYED_ATTR_TYPES:
            return None
        key += (name, t, value)
    return tuple(key)


class _Scratch:
    """C structures reused by call: a tensor array, an array for the outputs
    gk_op_call_alloc creates, and the gk_op_args over them for each (inputs, outputs,
    attributes) combination seen, attributes encoded once. A call takes one from
    _scratch_pool and puts it back after, so no two calls (in two threads, or a call and a
    finalizer run in the middle of it) ever share one."""

    __slots__ = ("tensors", "outs", "args")
    SIZE = 16  # tensor pointers (inputs + outputs) held; larger calls allocate their own
    MAX_ARGS = 256  # cached gk_op_args; past that the cache starts again

    def __init__(self):
        self.tensors = _newp(_T_GK_TENSOR_ARRAY, self.SIZE)
        self.outs = _newp(_T_GK_TENSOR_ARRAY, self.SIZE)
        # (num_inputs, num_outputs, _attrs_key or None) -> (gk_op_args, what it points to).
        # num_outputs is 0 for gk_op_call_alloc. A gk_op_args here is never written after
        # it is made (a call with a stream sets and resets args.stream, within the call).
        self.args = {}

    def args_for(self, n: int, num_outputs: int, attrs, key):
        """The gk_op_args for n inputs and num_outputs outputs in self.tensors (outputs
        after inputs) and `attrs` (whose _attrs_key is `key`)."""
        if attrs:
            attr_arr, count, keep = _attrs(attrs)
            keep = (attr_arr, keep)
        else:
            attr_arr, count, keep = _NULL, 0, None
        tensors = self.tensors
        args = _newp(_T_GK_OP_ARGS, [_SZ_GK_OP_ARGS, tensors, n,
                                     tensors + n if num_outputs else _NULL, num_outputs,
                                     attr_arr, count])
        if key is not None or not attrs:
            if len(self.args) >= self.MAX_ARGS:
                self.args.clear()
            self.args[(n, num_outputs, key)] = (args, keep)
        return args, keep


# Idle _Scratch objects. A plain list, not a thread-local: list.pop and list.append are
# atomic, and on a cold path (the first call after a wait) a thread-local read cost about
# 1.5 µs against 0.3 µs for the list (perf/python/bench_call_overhead.py --cold). It holds
# as many as calls ever ran at once.
_scratch_pool = [_Scratch()]


def call(op: str, inputs, attrs: dict | None = None, out=None, num_outputs: int = 1,
         stream=None):
    """Runs op `op` (docs/ops.md) once through the C ABI: the generic form behind every
    named function (gpukit.call). `inputs` is a list or tuple of arrays (any iterable is
    taken); `attrs` maps attribute names to values; `out` (an array or a list) receives the
    outputs, which are created (gk_op_call_alloc) when it is None, `num_outputs` of them.
    With no `stream`, the current stream (a task's, see gpukit.task) when it is on the
    inputs' device, else the device's default stream."""
    # Every call of every op passes here, so it is written for the interpreter: locals,
    # plain loops, one C call (see perf/python/bench_call_overhead.py). Bad arguments are
    # diagnosed where they fail (_refuse_call), so checking them costs nothing here.
    if type(inputs) is not list and type(inputs) is not tuple:
        inputs = _input_list(op, inputs)
    try:
        x0 = inputs[0]
        name = op.encode()
    except (IndexError, AttributeError):
        _refuse_call(op, inputs, out)
    if stream is None and _open_task_streams[0]:  # gpukit.current_stream(), inlined
        stream = _current_stream_get()
        if stream is not None and stream.device is not getattr(x0, "_device", None):
            stream = None  # a task's stream serves the task's device only
    n = len(inputs)
    if out is not None:
        # A list is used as given (read, never kept or changed).
        outs = out if type(out) is list else \
            list(out) if isinstance(out, (list, tuple)) else [out]
        num_outputs = len(outs)
        call_outputs = num_outputs
    else:
        call_outputs = 0
    k = n + call_outputs
    key = _attrs_key(attrs) if attrs else None
    try:
        s = _scratch_pool.pop()
    except IndexError:  # every one is in use
        s = _Scratch()
    args = None
    try:
        if k > _Scratch.SIZE:
            # Larger than the scratch array: structures of its own, for this call only.
            try:
                args, tensors, keep = _op_args(inputs, attrs, None, call_outputs)
            except AttributeError:
                _refuse_call(op, inputs, outs if out is not None else None)
        else:
            tensors = s.tensors
            cached = s.args.get((n, call_outputs, key)) if key is not None or not attrs \
                else None
            args, keep = cached if cached is not None else \
                s.args_for(n, call_outputs, attrs, key)
        i = 0
        try:
            for x in inputs:
                tensors[i] = x._t
                i += 1
            if out is not None:
                for o in outs:
                    tensors[i] = o._t
                    i += 1
        except (AttributeError, TypeError):
            _refuse_call(op, inputs, outs if out is not None else None)
        if stream is not None:  # else args.stream stays NULL
            try:
                args.stream = stream.ptr
            except AttributeError:
                raise InvalidArgument(f"gpukit.call({op!r}, ...): stream must be a "
                                      f"gpukit.Stream, got {type(stream).__name__}") from None
        if out is None:
            created = s.outs if num_outputs <= _Scratch.SIZE else \
                _newp(_T_GK_TENSOR_ARRAY, num_outputs)
            status = lib.gk_op_call_alloc(x0._rt._ptr, name, args, num_outputs,
                                          created, _NULL)
            if status != 0:
                check(status)
            device = x0._device
            if num_outputs == 1:
                # GPUArray._wrap(rt, created[0], stream, device, lazy=True), inlined.
                result = _new_object(GPUArray)
                result._rt = x0._rt
                result._t = created[0]
                result._device = device
                result._stream = stream
            else:
                result = tuple([GPUArray._wrap(x0._rt, created[i], stream, device, lazy=True)
                                for i in range(num_outputs)])
        else:
            status = lib.gk_op_call(x0._rt._ptr, name, args)
            if status != 0:
                check(status)
            for o in outs:
                o._stream = stream
            result = outs[0] if num_outputs == 1 else tuple(outs)
    finally:
        if stream is not None and args is not None:
            args.stream = _NULL
        _scratch_pool.append(s)
    return result


def _input_list(op, inputs) -> list:
    """`inputs` of gpukit.call as a list, or InvalidArgument naming what it is."""
    try:
        return list(inputs)
    except TypeError:
        raise InvalidArgument(f"gpukit.call({op!r}, ...): inputs must be a list or tuple of "
                              f"GPUArrays, got {type(inputs).__name__}") from None


def _refuse_call(op, inputs, outs) -> None:
    """Raises InvalidArgument naming the argument of gpukit.call that is wrong: called
    where the call failed on one, so the checks cost nothing on the calls that pass."""
    where = f"gpukit.call({op!r}, ...)"
    if not isinstance(op, str):
        raise InvalidArgument(f"{where}: op must be a str naming an op (docs/ops.md), got "
                              f"{type(op).__name__}")
    if len(inputs) == 0:
        raise InvalidArgument(f"{where}: inputs is empty; every op takes at least one input "
                              "array")
    for i, x in enumerate(inputs):
        if not isinstance(x, GPUArray):
            raise InvalidArgument(f"{where}: inputs[{i}] has type {type(x).__name__}, not "
                                  "GPUArray (convert it with gpukit.asarray)")
    for i, o in enumerate(outs or ()):
        if not isinstance(o, GPUArray):
            raise InvalidArgument(f"{where}: out[{i}] has type {type(o).__name__}, not GPUArray")
    raise InvalidArgument(f"{where}: an input or output array is not usable (a GPUArray "
                          "whose construction failed)")
