"""GPUArray: a NumPy-like array over a gk_tensor, with DLPack exchange.

Every op is one C call: gk_op_call_alloc, which creates the outputs and runs the op, or
gk_op_call when the caller gives `out`. Views (slicing, reshape, .T) share memory: a view is gk_tensor_from_external over the base tensor's
memory whose release callback is gk_tensor_release of a reference it holds to the base.
"""
from __future__ import annotations

import builtins as _b
import enum
import math
import numbers

import numpy as np

from . import _capsule
from ._lib import check, ffi, lib
from ._runtime import (Device, Runtime, Stream, _current_stream, _open_task_streams,
                       runtime as _runtime)
from .errors import InvalidArgument

# NumPy's AxisError (a ValueError and an IndexError): numpy.exceptions from NumPy 1.25 on.
_AxisError = getattr(getattr(np, "exceptions", np), "AxisError")

try:  # bfloat16 as a NumPy dtype, when available
    import ml_dtypes as _ml_dtypes

    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    _BF16 = None

__all__ = ["GPUArray", "asarray", "from_numpy", "from_dlpack", "empty", "zeros", "ones",
           "full", "arange", "matmul", "softmax", "add", "subtract", "multiply", "divide",
           "negative", "absolute", "equal", "not_equal", "less", "less_equal", "greater",
           "greater_equal", "sum", "mean", "max", "min", "DLDeviceType", "bfloat16"]

bfloat16 = _BF16


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


_SUPPORTED_DL_DEVICES = (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDA, DLDeviceType.kDLCUDAHost,
                         DLDeviceType.kDLCUDAManaged)

# gk_dtype <-> NumPy
_NP_TO_GK = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.float16): 3,
             np.dtype(np.int8): 5, np.dtype(np.int16): 6, np.dtype(np.int32): 7,
             np.dtype(np.int64): 8, np.dtype(np.uint8): 9, np.dtype(np.bool_): 10}
if _BF16 is not None:
    _NP_TO_GK[_BF16] = 4
_GK_TO_NP = {v: k for k, v in _NP_TO_GK.items()}
_GK_NAMES = {1: "f32", 2: "f64", 3: "f16", 4: "bf16", 5: "i8", 6: "i16", 7: "i32", 8: "i64",
             9: "u8", 10: "bool"}
_CASTABLE = {1, 2, 3, 4, 7, 8}
_FLOATING = {1, 2, 3, 4}
_ITEMSIZE = {1: 4, 2: 8, 3: 2, 4: 2, 5: 1, 6: 2, 7: 4, 8: 8, 9: 1, 10: 1}
_SUPPORTED_TEXT = ("float32, float64, float16, bfloat16 (with ml_dtypes), int8, int16, "
                   "int32, int64, uint8, bool")
# Block-quantized dtypes (GGUF's; gpukit.h "Weights, ABI 1.4"): gk_dtype -> (name, elements
# per block, bytes per block). A tensor of one is packed: its shape counts elements, its
# innermost dimension is a multiple of the block, it is contiguous, and it has no NumPy
# element type. Arrays of them come from gpukit.load_weights.
_PACKED = {32: ("q8_0", 32, 34), 33: ("q4_0", 32, 18), 34: ("q4_1", 32, 20),
           35: ("q4_k", 256, 144), 36: ("q5_k", 256, 176), 37: ("q6_k", 256, 210)}
_PACKED_BY_NAME = {name: gk for gk, (name, _, _) in _PACKED.items()}


def _dtype_name(gk: int) -> str:
    """The gk_dtype_name of a plain or block-quantized dtype ("f32", "q4_k")."""
    return _GK_NAMES[gk] if gk in _GK_NAMES else _PACKED[gk][0]


def _packed_bytes(gk: int, count: int) -> int:
    """Bytes of `count` elements of block-quantized dtype `gk` (whole blocks)."""
    _, block, block_bytes = _PACKED[gk]
    return -(-count // block) * block_bytes


def _packed_error(gk: int, what: str) -> TypeError:
    name, block, block_bytes = _PACKED[gk]
    return TypeError(
        f"{what}: dtype {name} is block-quantized (packed in blocks of {block} elements, "
        f"{block_bytes} bytes each) and has no NumPy element type; load the weights with "
        f"dtype=\"f32\" (or \"f16\", \"bf16\") to get them dequantized, or read the packed "
        "bytes with .raw_bytes()")
_RELEASE_TENSOR = ffi.cast("gk_release_fn", lib.gk_tensor_release)
_T_CHAR = ffi.typeof("char[]")
_T_DLMANAGEDTENSOR = ffi.typeof("DLManagedTensor**")
_T_DLMANAGEDTENSORVERSIONED = ffi.typeof("DLManagedTensorVersioned**")
_T_GK_ATTR = ffi.typeof("gk_attr[]")
_T_GK_EVENT = ffi.typeof("gk_event**")
_T_GK_OP_ARGS = ffi.typeof("gk_op_args*")
_T_GK_STREAM = ffi.typeof("gk_stream**")
_T_GK_TENSOR = ffi.typeof("gk_tensor**")
_T_GK_TENSOR_ARRAY = ffi.typeof("gk_tensor*[]")
_T_GK_TENSOR_DESC = ffi.typeof("gk_tensor_desc*")
_T_INT64_T = ffi.typeof("int64_t[]")
_T_DLMANAGEDTENSORVERSIONED_PTR = ffi.typeof("DLManagedTensorVersioned*")
_SZ_GK_OP_ARGS = ffi.sizeof("gk_op_args")
_SZ_GK_TENSOR_DESC = ffi.sizeof("gk_tensor_desc")
_NULL = ffi.NULL
# cffi's backend entry points: ffi.new / ffi.cast are Python wrappers around them (one
# Python call each on the hot paths below).
_newp = ffi._backend.newp
_cast = ffi._backend.cast
_new_object = object.__new__
_DESC_INIT = [_SZ_GK_TENSOR_DESC]  # struct_size, the rest zero


def _desc_layout():
    """A struct.Struct reading gk_tensor_desc's dtype, ndim, shape, strides and flags, at
    the offsets cffi computed from the header."""
    import struct
    off = {name: ffi.offsetof("gk_tensor_desc", name)
           for name in ("dtype", "ndim", "shape", "strides", "flags")}
    assert off["ndim"] == off["dtype"] + 4 and off["strides"] == off["shape"] + 8 * lib.GK_MAX_DIMS
    fmt = (f"={off['dtype']}x i i {off['shape'] - off['ndim'] - 4}x {2 * lib.GK_MAX_DIMS}q "
           f"{off['flags'] - off['strides'] - 8 * lib.GK_MAX_DIMS}x I")
    layout = struct.Struct(fmt)
    assert layout.size <= _SZ_GK_TENSOR_DESC
    return layout


_DESC_LAYOUT = _desc_layout()
_DESC_STRIDES = 2 + lib.GK_MAX_DIMS  # index of strides[0] in an unpacked descriptor
_release = lib.gk_tensor_release
# The attributes GPUArray reads from its tensor's descriptor on first use (see __getattr__).
_META_SLOTS = frozenset(("_meta", "_gk_dtype", "_shape", "_strides", "_flags"))
_DLPACK_MAJOR = lib.DLPACK_MAJOR_VERSION
_USED_VERSIONED_ADDRESS = _capsule._ADDRESSES[_capsule.USED_VERSIONED]
_VERSIONED = _capsule.VERSIONED
_GetPointer = _capsule._GetPointer
_SetName = _capsule._SetName
_FAILED_PRECONDITION = lib.GK_FAILED_PRECONDITION
_MAX_VERSION = (1, 1)  # the DLPack version we ask producers for
_current_stream_get = _current_stream.get
_OP_SIGN = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _gk_dtype(dtype) -> int:
    if isinstance(dtype, str) and dtype in _PACKED_BY_NAME:
        return _PACKED_BY_NAME[dtype]
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        if _BF16 is None:
            return 4
        dtype = _BF16
    if isinstance(dtype, str):
        for k, v in _GK_NAMES.items():
            if v == dtype:
                return k
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"unsupported dtype {dtype!r}; supported: {_SUPPORTED_TEXT}") from e
    if not d.isnative:
        d = d.newbyteorder("=")  # the values are converted to native order when copied
    if d not in _NP_TO_GK:
        raise TypeError(f"unsupported dtype {d}; supported: {_SUPPORTED_TEXT}")
    return _NP_TO_GK[d]


def _np_dtype(gk: int):
    if gk in _GK_TO_NP:
        return _GK_TO_NP[gk]
    if gk in _PACKED:
        raise _packed_error(gk, "no NumPy dtype")
    raise TypeError("bfloat16 arrays need the ml_dtypes package to be seen from NumPy "
                    "(pip install ml_dtypes)")


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= _b.max(n, 1)
    return tuple(reversed(strides))


_INT64_MAX = 2**63 - 1


def _check_shape(shape, gk_dtype: int) -> None:
    """Refuses a shape the C ABI cannot describe: more than GK_MAX_DIMS dimensions, a
    dimension that is negative or not an integer, or an element count or byte size past
    int64 (a shape such as (2**61,) of float64 would overflow the size computations)."""
    if len(shape) > lib.GK_MAX_DIMS:
        raise ValueError(f"{len(shape)} dimensions; GPUkit tensors have at most "
                         f"{lib.GK_MAX_DIMS}")
    count = 1
    for i, n in enumerate(shape):
        if not isinstance(n, (numbers.Integral, np.integer)) or isinstance(n, bool):
            raise TypeError(f"shape {tuple(shape)}: dimension {i} is a {type(n).__name__}, "
                            "not an integer")
        if n < 0:
            raise ValueError(f"shape {tuple(shape)}: dimension {i} is {n}; negative "
                             "dimensions are not allowed")
        count *= int(n)
    if count > _INT64_MAX:
        raise ValueError(f"shape {tuple(shape)} has {count} elements, more than the "
                         f"2**63 - 1 a GPUkit tensor can hold")
    if gk_dtype in _PACKED:
        name, block, _ = _PACKED[gk_dtype]
        if not shape or shape[-1] % block:
            raise ValueError(f"shape {tuple(shape)} of {name}: the innermost dimension must "
                             f"be a multiple of the block of {block} elements")
        nbytes = _packed_bytes(gk_dtype, count)
    else:
        nbytes = count * _ITEMSIZE[gk_dtype]
    if nbytes > _INT64_MAX:
        raise ValueError(f"shape {tuple(shape)} of {_dtype_name(gk_dtype)} is "
                         f"{nbytes} bytes, more than the 2**63 - 1 a "
                         "GPUkit tensor can hold")


def _desc_for(gk_dtype: int, shape, strides=None, flags: int = 0):
    _check_shape(shape, gk_dtype)
    d = ffi.new(_T_GK_TENSOR_DESC)
    d.struct_size = _SZ_GK_TENSOR_DESC
    d.dtype = gk_dtype
    d.ndim = len(shape)
    for i, n in enumerate(shape):
        d.shape[i] = int(n)
    if strides is not None:
        for i, s in enumerate(strides):
            d.strides[i] = int(s)
        d.has_strides = 1
    d.flags = flags
    return d


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


class GPUArray:
    """An n-dimensional array on one GPUkit device (cpu or CUDA), over a gk_tensor."""

    __array_priority__ = 100  # NumPy defers mixed operators to us
    __slots__ = ("_rt", "_t", "_device", "_stream", "_meta", "_gk_dtype", "_shape", "_strides",
                 "_flags", "_taddr", "__weakref__")

    def __init__(self):
        raise TypeError("use gpukit.asarray / empty / zeros / from_dlpack to make arrays")

    # -- construction --------------------------------------------------------------
    @classmethod
    def _wrap(cls, rt: Runtime, tensor_ptr, stream=None, device: Device | None = None,
              meta=None, lazy: bool = False) -> "GPUArray":
        """An array owning one reference to `tensor_ptr`. `device` (when known) saves a
        look-up; `meta` (dtype, shape, strides, flags), when the caller already has the
        tensor's descriptor, saves gk_tensor_get_desc; `lazy` defers that call to the first
        use of dtype, shape, strides or flags (see __getattr__)."""
        self = object.__new__(cls)
        self._rt = rt
        self._t = tensor_ptr  # the reference is released by __del__
        if meta is not None:
            self._meta = meta
            self._gk_dtype, self._shape, self._strides, self._flags = meta
        elif not lazy:
            self._load_meta()
        if device is None:
            device = rt.devices()[lib.gk_tensor_device(self._t)]
        self._device = device
        self._stream = stream
        return self

    def __del__(self, _release=_release):
        # One reference per array, released when the array goes (cheaper than ffi.gc's
        # wrapper object). `_t` is unset only if construction failed before taking it.
        try:
            t = self._t
        except AttributeError:
            return
        _release(t)

    def _load_meta(self):
        d = _newp(_T_GK_TENSOR_DESC, _DESC_INIT)
        status = lib.gk_tensor_get_desc(self._t, d)
        if status != 0:
            check(status)
        # One unpack of the whole struct: each cdata field read would be a call of its own.
        f = _DESC_LAYOUT.unpack_from(ffi.buffer(d))
        ndim = f[1]
        meta = (f[0], f[2:2 + ndim], f[_DESC_STRIDES:_DESC_STRIDES + ndim], f[-1])
        self._meta = meta
        self._gk_dtype, self._shape, self._strides, self._flags = meta

    def __getattr__(self, attr):
        # Only called for a slot not yet set: the descriptor of a lazily wrapped tensor
        # (an op's output, a DLPack import) is read from the library on first use.
        if attr in _META_SLOTS:
            self._load_meta()
            return object.__getattribute__(self, attr)
        if attr == "_taddr":
            # The gk_tensor's address as an int, for packing kernel arguments (gpukit.jit):
            # converting the cdata costs more than the rest of a launch's packing.
            self._taddr = int(ffi.cast("uintptr_t", self._t))
            return self._taddr
        raise AttributeError(f"'GPUArray' object has no attribute {attr!r}")

    @classmethod
    def _create(cls, rt: Runtime, device: Device, desc, stream=None, meta=None) -> "GPUArray":
        out = ffi.new(_T_GK_TENSOR)
        status = lib.gk_tensor_create(rt._ptr, device.id, desc,
                                      stream.ptr if stream is not None else ffi.NULL, out)
        if status != 0:
            check(status)
        return cls._wrap(rt, out[0], stream, device, meta)

    def _view(self, shape, strides, elem_offset: int = 0, gk_dtype=None) -> "GPUArray":
        """A view sharing this array's memory (holds a reference to its tensor)."""
        gk_dtype = gk_dtype or self._gk_dtype
        if gk_dtype in _PACKED:
            name, block, _ = _PACKED[gk_dtype]
            raise TypeError(f"a {name} array is packed in blocks of {block} elements and "
                            "cannot be viewed (indexed, reshaped or transposed); load the "
                            "weights with dtype=\"f32\" to get a plain array")
        desc = _desc_for(gk_dtype, shape, strides, self._flags)
        ptr = ffi.cast("char*", lib.gk_tensor_data(self._t))
        if math.prod(shape) > 0:
            ptr = ptr + elem_offset * self.itemsize
        lib.gk_tensor_retain(self._t)
        out = ffi.new(_T_GK_TENSOR)
        status = lib.gk_tensor_from_external(self._rt.ptr, self._device.id, ptr, desc,
                                             _RELEASE_TENSOR, self._t, out)
        if status != 0:
            lib.gk_tensor_release(self._t)
            check(status)
        return GPUArray._wrap(self._rt, out[0], self._stream)

    def _desc(self):
        return _desc_for(self._gk_dtype, self._shape, self._strides, self._flags)

    # -- properties ----------------------------------------------------------------
    @property
    def dtype(self):
        """The NumPy dtype (ml_dtypes.bfloat16 for bf16; the string "bfloat16" without
        ml_dtypes; the dtype's name, such as "q4_k", for a block-quantized array)."""
        if self._gk_dtype == 4 and _BF16 is None:
            return "bfloat16"
        if self._gk_dtype in _PACKED:
            return _PACKED[self._gk_dtype][0]
        return _GK_TO_NP[self._gk_dtype]

    @property
    def dtype_name(self) -> str:
        """The gk_dtype name: "f32", "bf16", "i64", "q4_k", …"""
        return _dtype_name(self._gk_dtype)

    @property
    def is_packed(self) -> bool:
        """Whether the dtype is block-quantized (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k)."""
        return self._gk_dtype in _PACKED

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def strides(self) -> tuple:
        """Strides in bytes, as NumPy reports them (none for a block-quantized array: it
        is packed; see element_strides)."""
        return tuple(s * self.itemsize for s in self._strides)

    @property
    def element_strides(self) -> tuple:
        return self._strides

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element; a block-quantized array has none (TypeError): see nbytes."""
        try:
            return _ITEMSIZE[self._gk_dtype]
        except KeyError:
            raise _packed_error(self._gk_dtype, "itemsize") from None

    @property
    def nbytes(self) -> int:
        if self._gk_dtype in _PACKED:
            return _packed_bytes(self._gk_dtype, self.size)
        return self.size * self.itemsize

    @property
    def device(self) -> Device:
        return self._device

    @property
    def readonly(self) -> bool:
        return bool(self._flags & lib.GK_TENSOR_READ_ONLY)

    @property
    def data_ptr(self) -> int:
        """The address of element [0, …, 0] (host pointer or CUdeviceptr)."""
        return int(ffi.cast("uintptr_t", lib.gk_tensor_data(self._t)))

    @property
    def is_contiguous(self) -> bool:
        expected = 1
        for n, s in zip(reversed(self._shape), reversed(self._strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d array")
        return self._shape[0]

    def __repr__(self):
        try:
            body = np.array2string(self.to_numpy(), separator=", ")
        except Exception:  # noqa: BLE001
            body = "…"
        return f"GPUArray({body}, dtype={self.dtype}, device={self._device})"

    # -- host exchange -------------------------------------------------------------
    def to_numpy(self, copy: bool = False) -> np.ndarray:
        """A NumPy array. For the cpu device it is a zero-copy view of the same memory
        (read-only when this array is) unless copy=True; for CUDA, a host copy. A
        block-quantized array has no NumPy form (TypeError; see raw_bytes)."""
        if self._gk_dtype in _PACKED:
            raise _packed_error(self._gk_dtype, "to_numpy")
        dtype = _np_dtype(self._gk_dtype)
        if self.size == 0:
            return np.empty(self._shape, dtype)
        if not self._device.is_cuda:
            holder = _HostView(self, dtype)
            arr = np.asarray(holder)
            if self._gk_dtype == 4:
                arr = arr.view(_BF16)
            return arr.copy() if copy else arr
        src = self if self.is_contiguous else self._contiguous()
        if src.is_contiguous:
            _wait_for(src)
            host = np.empty(self._shape, dtype)
            check(lib.gk_copy_to_host(src._t, ffi.cast("void*", host.ctypes.data), host.nbytes,
                                      ffi.NULL))
            return host
        return self._host_via_extent(dtype)

    def raw_bytes(self) -> np.ndarray:
        """The array's bytes as a 1-D uint8 NumPy array, as stored (a block-quantized
        array's packed blocks, in llama.cpp's layout). For the cpu device a zero-copy view
        (read-only when the array is); for CUDA, a host copy. The array must be
        contiguous."""
        if not self.is_contiguous:
            raise ValueError("raw_bytes: the array is not contiguous; call .contiguous() first")
        n = self.nbytes
        if n == 0:
            return np.empty(0, np.uint8)
        if not self._device.is_cuda:
            holder = _HostView(self, np.uint8, raw=True)
            return np.asarray(holder)
        _wait_for(self)
        host = np.empty(n, np.uint8)
        check(lib.gk_copy_to_host(self._t, ffi.cast("void*", host.ctypes.data), n, ffi.NULL))
        return host

    def _host_via_extent(self, dtype) -> np.ndarray:
        """Copies the byte range a strided view spans and strides it on the host."""
        lo = _b.sum(_b.min(0, (n - 1) * s) for n, s in zip(self._shape, self._strides))
        hi = _b.sum(_b.max(0, (n - 1) * s) for n, s in zip(self._shape, self._strides))
        span = hi - lo + 1
        base = self._view((span,), (1,), lo)
        _wait_for(base)
        raw = np.empty(span, dtype)
        check(lib.gk_copy_to_host(base._t, ffi.cast("void*", raw.ctypes.data), raw.nbytes,
                                  ffi.NULL))
        view = np.lib.stride_tricks.as_strided(
            raw[-lo:], self._shape, tuple(s * self.itemsize for s in self._strides))
        return np.ascontiguousarray(view)

    def __array__(self, dtype=None, copy=None):
        arr = self.to_numpy(copy=bool(copy))
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError("a dtype change needs a copy")
            arr = arr.astype(dtype)
        return arr

    def tolist(self):
        return self.to_numpy().tolist()

    def item(self):
        return self.to_numpy().item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    # -- copies, devices, dtypes ----------------------------------------------------
    def _contiguous(self) -> "GPUArray":
        """A contiguous copy: op "cast" to the same dtype where cast serves the dtype
        (f32 f64 f16 bf16 i32 i64); otherwise through the host (i8 i16 u8 bool)."""
        if self._gk_dtype in _CASTABLE:
            return call("cast", [self], {"dtype": _GK_NAMES[self._gk_dtype]})
        host = self._host_strided()
        return _from_host(host, self._device, self._gk_dtype)

    def _host_strided(self) -> np.ndarray:
        if not self._device.is_cuda:
            return np.ascontiguousarray(self.to_numpy())
        return self._host_via_extent(_np_dtype(self._gk_dtype))

    def copy(self) -> "GPUArray":
        return self._contiguous() if self._gk_dtype in _CASTABLE or not self.is_contiguous \
            else _copy_tensor(self)

    def contiguous(self) -> "GPUArray":
        return self if self.is_contiguous else self._contiguous()

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

    def to_device(self, device) -> "GPUArray":
        dev = self._rt.device(device)
        if dev == self._device:
            return self
        src = self.contiguous()
        desc = _desc_for(self._gk_dtype, self._shape)
        dst = GPUArray._create(self._rt, dev, desc)
        _wait_for(src)
        check(lib.gk_copy(dst._t, src._t, ffi.NULL))
        return dst

    to = to_device

    # -- views -----------------------------------------------------------------------
    def reshape(self, *shape) -> "GPUArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if shape.count(-1) > 1:
            raise ValueError("can only specify one unknown dimension")
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
        src = self if self.is_contiguous else self._contiguous()
        return src._view(shape, _contiguous_strides(shape))

    def transpose(self, *axes) -> "GPUArray":
        if not axes or axes == (None,):
            axes = tuple(reversed(range(self.ndim)))
        elif len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if len(axes) != self.ndim:
            raise ValueError(f"axes {axes} don't match an array of {self.ndim} dimensions")
        axes = tuple(_normalize_axis(a, self.ndim) for a in axes)
        if len(set(axes)) != self.ndim:
            raise ValueError(f"repeated axis in transpose: {axes}")
        return self._view(tuple(self._shape[a] for a in axes),
                          tuple(self._strides[a] for a in axes))

    @property
    def T(self) -> "GPUArray":
        return self.transpose()

    def __getitem__(self, key) -> "GPUArray":
        if not isinstance(key, tuple):
            key = (key,)
        n_real = _b.sum(1 for k in key if k is not None and k is not Ellipsis)
        if _b.sum(1 for k in key if k is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_real > self.ndim:
            raise IndexError(f"too many indices for an array of {self.ndim} dimensions")
        expanded = []
        for k in key:
            if k is Ellipsis:
                expanded += [slice(None)] * (self.ndim - n_real)
            else:
                expanded.append(k)
        if Ellipsis not in key:
            expanded += [slice(None)] * (self.ndim - n_real)
        shape, strides, offset, axis = [], [], 0, 0
        for k in expanded:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self._shape[axis], self._strides[axis]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                count = len(range(start, stop, step))
                shape.append(count)
                strides.append(s * step)
                if count:
                    offset += start * s
            elif isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, bool):
                i = int(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                offset += (i % n) * s
            else:
                raise IndexError("only basic indexing (integers, slices, ..., None) is "
                                 f"supported, not {type(k).__name__}")
            axis += 1
        return self._view(tuple(shape), tuple(strides), offset)

    # -- operators ---------------------------------------------------------------------
    # == returns an array, as in NumPy, so arrays are unhashable (NumPy's rule too).
    __hash__ = None

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

    # -- DLPack ------------------------------------------------------------------------------
    def __dlpack_device__(self):
        if self._device.is_cuda:
            return (DLDeviceType.kDLCUDA, self._device.ordinal)
        return (DLDeviceType.kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports a DLPack capsule: "dltensor_versioned" when max_version >= (1, 0),
        else legacy "dltensor". `stream` is the consumer's CUDA stream (None or 1: the
        legacy default stream, 2: per-thread default, -1: no synchronisation, 0:
        refused); the consumer's stream waits for this array's producing stream."""
        if self._gk_dtype in _PACKED:
            name, block, _ = _PACKED[self._gk_dtype]
            raise BufferError(f"a {name} array (packed in blocks of {block} elements) has no "
                              "DLPack dtype; load the weights with dtype=\"f32\", \"f16\" or "
                              "\"bf16\" to exchange them")
        src, copied = self, False
        device = self._device
        if dl_device is not None and tuple(dl_device) != tuple(self.__dlpack_device__()):
            if copy is False:
                raise BufferError(f"dl_device {tuple(dl_device)} differs from the array's "
                                  f"{tuple(self.__dlpack_device__())} and copy=False")
            src, copied = self.to_device(_device_from_dl(self._rt, dl_device)), True
        elif copy:
            src, copied = self.copy(), True
        if src is not self:
            device = src._device
        if device.kind == "cuda":
            _sync_for_consumer(src, stream)
        elif stream is not None and stream != -1:
            raise BufferError(f"stream={stream!r} given for a cpu array; it must be None")
        if max_version is not None and max_version[0] >= 1:
            out = ffi.new(_T_DLMANAGEDTENSORVERSIONED)
            flags = lib.DLPACK_FLAG_BITMASK_IS_COPIED if copied else 0
            status = lib.gk_tensor_to_dlpack_versioned(src._t, flags, out)
            if status != 0:
                check(status)
            return _capsule.new(out[0], True)
        if src.readonly:
            raise BufferError("a read-only array cannot be exported as a legacy (unversioned) "
                              "DLPack capsule; the consumer must pass max_version >= (1, 0)")
        out = ffi.new(_T_DLMANAGEDTENSOR)
        check(lib.gk_tensor_to_dlpack(src._t, out))
        return _capsule.new(out[0], False)


class _HostView:
    """Exposes a cpu GPUArray's memory to NumPy and keeps the array alive. With raw=True,
    the bytes of a contiguous array as a 1-D uint8 array."""

    def __init__(self, arr: GPUArray, dtype, raw: bool = False):
        self._keep = arr
        if raw:
            self.__array_interface__ = {
                "version": 3, "shape": (arr.nbytes,), "typestr": "|u1",
                "data": (arr.data_ptr, arr.readonly), "strides": None,
            }
            return
        typestr = "<u2" if arr._gk_dtype == 4 else np.dtype(dtype).str
        self.__array_interface__ = {
            "version": 3, "shape": arr._shape, "typestr": typestr,
            "data": (arr.data_ptr, arr.readonly),
            "strides": tuple(s * arr.itemsize for s in arr._strides),
        }


# -- construction helpers -----------------------------------------------------------------
def _device_from_dl(rt: Runtime, dl_device) -> Device:
    kind, dev_id = int(dl_device[0]), int(dl_device[1])
    if kind in (1, 3):
        return rt.device("cpu")
    if kind in (2, 13):
        return rt.device(f"cuda:{dev_id}")
    raise BufferError(f"unsupported DLPack device type {_dl_name(kind)}; supported: kDLCPU, "
                      "kDLCUDAHost, kDLCUDA, kDLCUDAManaged")


def _dl_name(kind: int) -> str:
    try:
        return f"{DLDeviceType(kind).name} ({kind})"
    except ValueError:
        return f"unknown ({kind})"


def _from_host(host: np.ndarray, device: Device, gk_dtype: int | None = None,
               rt: Runtime | None = None) -> GPUArray:
    """A new GPUkit-owned array with a copy of `host`."""
    rt = rt or device.runtime
    gk_dtype = gk_dtype or _gk_dtype(host.dtype)
    if not host.dtype.isnative:
        # GPUkit tensors hold native byte order: swap the bytes, keep the values.
        host = host.astype(host.dtype.newbyteorder("="))
    host = np.ascontiguousarray(host)
    desc = _desc_for(gk_dtype, host.shape)
    arr = GPUArray._create(rt, device, desc)
    if host.nbytes:
        check(lib.gk_copy_from_host(arr._t, ffi.cast("void*", host.ctypes.data), host.nbytes,
                                    ffi.NULL))
    return arr


def _wait_for(x: GPUArray) -> None:
    """Blocks until the stream `x` was produced on (if not the default stream) has finished
    its work, so a copy on the default stream reads the result: a task's or a user's
    stream is non-blocking, not ordered with the default stream."""
    if x._stream is not None and x._device.is_cuda:
        x._stream.synchronize()


def _copy_tensor(x: GPUArray) -> GPUArray:
    dst = GPUArray._create(x._rt, x._device, _desc_for(x._gk_dtype, x._shape))
    _wait_for(x)
    check(lib.gk_copy(dst._t, x._t, ffi.NULL))
    return dst


def _resolve(device, rt: Runtime | None = None) -> Device:
    if isinstance(device, Device):
        return device
    return (rt or _runtime()).device(device)


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


def _normalize_axis(axis, ndim: int) -> int:
    """`axis` in [-ndim, ndim) as a non-negative index, else NumPy's AxisError."""
    if not isinstance(axis, (numbers.Integral, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"an axis must be an integer, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise _AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return int(axis) % ndim


def _broadcast_shapes(a: tuple, b: tuple, op: str) -> tuple:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise ValueError(f"{op}: shapes {a} and {b} do not broadcast") from None


def _scalar(value, dtype, device: Device) -> GPUArray:
    return _from_host(np.asarray(value, dtype=dtype), device)


# -- public constructors ---------------------------------------------------------------------
def asarray(obj, dtype=None, device=None, copy=None) -> GPUArray:
    """An array from a GPUArray, any DLPack producer (NumPy, PyTorch, CuPy, JAX: zero copy
    when it stays on its device and no dtype change is asked), or nested sequences and
    scalars (copied to `device`, default: the runtime's default device)."""
    if isinstance(obj, GPUArray):
        x = obj
        if device is not None:
            x = x.to_device(device)
        if dtype is not None and _gk_dtype(dtype) != x._gk_dtype:
            x = x.astype(dtype)
        elif copy and x is obj:
            x = x.copy()
        return x
    if isinstance(obj, np.ndarray):
        _gk_dtype(obj.dtype)  # refuse unsupported dtypes up front, with their name
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__") and not copy:
        try:
            x = from_dlpack(obj, device=device, copy=copy)
        except BufferError:
            if copy is False:
                raise
        else:
            return x.astype(dtype) if dtype is not None and _gk_dtype(dtype) != x._gk_dtype \
                else x
    host = np.asarray(obj, dtype=_np_dtype(_gk_dtype(dtype)) if dtype is not None else None)
    if copy is False:
        raise BufferError("copy=False but the object has to be copied to become a GPUArray")
    return _from_host(host, _resolve(device))


def from_numpy(arr: np.ndarray) -> GPUArray:
    """A zero-copy cpu array over a NumPy array's memory (read-only stays read-only)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray, got {type(arr).__name__}")
    _gk_dtype(arr.dtype)
    return from_dlpack(arr, device="cpu", copy=False)


def from_dlpack(x, *, device=None, copy=None) -> GPUArray:
    """Imports any object with __dlpack__/__dlpack_device__ (array-API from_dlpack).
    Zero copy unless `device` differs from the producer's or copy=True."""
    if isinstance(x, GPUArray):
        return asarray(x, device=device, copy=copy)
    rt = _runtime()
    try:
        dl_device = x.__dlpack_device__()
    except AttributeError:
        if not hasattr(x, "__dlpack_device__"):
            raise TypeError(f"{type(x).__name__} does not implement __dlpack_device__") from None
        raise
    if type(dl_device) is not tuple:
        dl_device = tuple(dl_device)
    source = rt._dl_devices.get(dl_device)
    if source is None:
        kind, dev_id = dl_device
        source = _device_from_dl(rt, (kind, dev_id))
        rt._dl_devices[(int(kind), int(dev_id))] = source
    stream = 1 if source.kind == "cuda" else None  # our work runs on the legacy default stream
    if device is None and copy is None:
        # The usual call: zero copy on the producer's device.
        try:
            capsule = x.__dlpack__(stream=stream, max_version=_MAX_VERSION)
        except TypeError:  # a producer that predates DLPack 1.0 keywords
            capsule = x.__dlpack__(stream=stream) if stream is not None else x.__dlpack__()
        if isinstance(capsule, GPUArray):
            return capsule
        return _import_capsule(rt, capsule, source)
    target = source if device is None else _resolve(device, rt)
    if target is not source and target != source and copy is False:
        raise BufferError(f"the producer's data is on {source}, {target} was asked and "
                          "copy=False")
    try:
        if copy is None:
            capsule = x.__dlpack__(stream=stream, max_version=_MAX_VERSION)
        else:
            capsule = x.__dlpack__(stream=stream, max_version=_MAX_VERSION, copy=copy)
    except TypeError:  # a producer that predates DLPack 1.0 keywords
        capsule = x.__dlpack__(stream=stream) if stream is not None else x.__dlpack__()
        if copy:
            capsule = _import_capsule(rt, capsule).copy()
            return capsule.to_device(target)
    arr = capsule if isinstance(capsule, GPUArray) else _import_capsule(rt, capsule, source)
    return arr.to_device(target) if target is not source and target != source else arr


def _import_capsule(rt: Runtime, capsule, device: Device | None = None) -> GPUArray:
    out = _newp(_T_GK_TENSOR)
    # _capsule.versioned_pointer and mark_used, inlined: this is the import's hot path.
    try:
        address = _GetPointer(capsule, _VERSIONED)
    except ValueError:  # another name, or not a capsule
        address = None
    if address is not None:
        status = lib.gk_tensor_from_dlpack_versioned(
            rt._ptr, _cast(_T_DLMANAGEDTENSORVERSIONED_PTR, address), out)
        if status != 0:
            if status == _FAILED_PRECONDITION:
                # Another major version: the library called its deleter, as DLPack says
                # (gpukit_dlpack.h: the only failure that does), so the capsule is used.
                _capsule.mark_used(capsule, True)
            check(status)
        if _SetName(capsule, _USED_VERSIONED_ADDRESS) != 0:
            raise BufferError("could not rename the DLPack capsule")
    elif _capsule.is_valid(capsule, _capsule.LEGACY):
        m = ffi.cast("DLManagedTensor*", _capsule.pointer(capsule, _capsule.LEGACY))
        check(lib.gk_tensor_from_dlpack(rt.ptr, m, out))
        _capsule.mark_used(capsule, False)
    else:
        raise BufferError(f"not an unconsumed DLPack capsule (name {_capsule.name_of(capsule)!r})")
    if device is None:
        return GPUArray._wrap(rt, out[0], lazy=True)
    # GPUArray._wrap(rt, out[0], device=device, lazy=True), inlined (the import's hot path).
    arr = _new_object(GPUArray)
    arr._rt = rt
    arr._t = out[0]
    arr._device = device
    arr._stream = None
    return arr


def _sync_for_consumer(x: GPUArray, stream) -> None:
    if stream is None:
        stream = 1
    if stream == 0:
        raise BufferError("stream=0 is ambiguous for CUDA and refused by the DLPack protocol; "
                          "pass 1 (legacy default), 2 (per-thread default) or a stream handle")
    if stream == -1:
        return
    producer = x._stream
    if producer is None and stream == 1:
        return  # same stream: our default stream is the legacy default stream
    rt, dev = x._rt, x._device
    ev = ffi.new(_T_GK_EVENT)
    check(lib.gk_event_create(rt.ptr, dev.id, ev))
    consumer = ffi.new(_T_GK_STREAM)
    try:
        check(lib.gk_event_record(ev[0], producer.ptr if producer is not None else ffi.NULL))
        # A wrapper of the consumer's stream, freed right after: destroying a wrapped
        # stream neither waits on nor destroys the consumer's stream.
        check(lib.gk_stream_wrap(rt.ptr, dev.id, ffi.cast("void*", int(stream)), consumer))
        check(lib.gk_stream_wait_event(consumer[0], ev[0]))
    finally:
        if consumer[0] != ffi.NULL:
            lib.gk_stream_destroy(consumer[0])
        lib.gk_event_destroy(ev[0])


def empty(shape, dtype=np.float32, device=None) -> GPUArray:
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    dev = _resolve(device)
    return GPUArray._create(dev.runtime, dev, _desc_for(_gk_dtype(dtype), shape))


def full(shape, fill_value, dtype=None, device=None) -> GPUArray:
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
    gk = _gk_dtype(dtype)
    _check_shape(shape, gk)
    return _from_host(np.full(shape, fill_value, dtype=_np_dtype(gk)), _resolve(device), gk)


def zeros(shape, dtype=np.float32, device=None) -> GPUArray:
    return full(shape, 0, dtype, device)


def ones(shape, dtype=np.float32, device=None) -> GPUArray:
    return full(shape, 1, dtype, device)


def arange(start, stop=None, step=1, dtype=None, device=None) -> GPUArray:
    host = np.arange(start, stop, step, dtype=None if dtype is None else _np_dtype(_gk_dtype(dtype)))
    return _from_host(host, _resolve(device))


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
