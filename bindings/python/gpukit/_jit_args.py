"""How the arguments of a JIT kernel launch become gk_jit_arg values (see jit.py's docstring
for the rules), and the stream a launch runs on.
"""
from __future__ import annotations

import numbers
import struct
import threading

import numpy as np

from ._array import GPUArray
from ._creation import from_dlpack
from ._lib import ffi
from ._runtime import Device, Stream, current_stream

_ARG_TENSOR, _ARG_I32, _ARG_I64, _ARG_F32, _ARG_F64, _ARG_POINTER, _ARG_BYTES, _ARG_U32, \
    _ARG_U64 = 1, 2, 3, 4, 5, 6, 7, 8, 9
_NP_SCALAR_KIND = {np.dtype(np.float32): (_ARG_F32, "f32"), np.dtype(np.float64): (_ARG_F64, "f64"),
                   np.dtype(np.int32): (_ARG_I32, "i32"), np.dtype(np.int64): (_ARG_I64, "i64"),
                   np.dtype(np.uint32): (_ARG_U32, "u32"), np.dtype(np.uint64): (_ARG_U64, "u64")}


def _dims(value, what: str) -> tuple:
    """(x, y, z) from an int or a tuple/list of 1 to 3 ints, each in [1, 2^32)."""
    # The common forms first, without the generic conversion below.
    if type(value) is tuple:
        if len(value) == 3:
            x, y, z = value
            if type(x) is int and type(y) is int and type(z) is int and \
                    0 < x <= 0xFFFFFFFF and 0 < y <= 0xFFFFFFFF and 0 < z <= 0xFFFFFFFF:
                return value
        elif len(value) == 1:
            x = value[0]
            if type(x) is int and 0 < x <= 0xFFFFFFFF:
                return (x, 1, 1)
    elif type(value) is int and 0 < value <= 0xFFFFFFFF:
        return (value, 1, 1)
    if isinstance(value, numbers.Integral):
        value = (int(value),)
    value = tuple(int(v) for v in value)
    if not 1 <= len(value) <= 3 or any(v < 1 or v > 0xFFFFFFFF for v in value):
        raise ValueError(f"{what} must be 1 to 3 extents, each in [1, 2^32): got {value}")
    return value + (1,) * (3 - len(value))


# Streams wrapped from other libraries' native handles, by (runtime, device, handle).
_wrapped_streams = {}
_wrapped_lock = threading.Lock()


def _stream_ptr(stream, device: Device):
    """The gk_stream* to launch on: `stream` (a gpukit.Stream, a CuPy/PyTorch stream or a
    native CUstream int), else the current task stream, else the device's default."""
    if stream is None:
        stream = current_stream()
        if stream is not None and stream.device != device:
            stream = None
        return stream.ptr if stream is not None else ffi.NULL
    if isinstance(stream, Stream):
        return stream.ptr
    native = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if native is None:
        native = getattr(stream, "ptr", None)      # cupy.cuda.Stream
    if native is None and isinstance(stream, numbers.Integral):
        native = int(stream)
    if native is None:
        raise TypeError(f"stream must be a gpukit.Stream, a CuPy or PyTorch stream or a native "
                        f"CUstream int, got {type(stream).__name__}")
    key = (id(device.runtime), device.id, int(native))
    with _wrapped_lock:
        wrapped = _wrapped_streams.get(key)
        if wrapped is None:
            wrapped = Stream.wrap(int(native), device, runtime=device.runtime)
            _wrapped_streams[key] = wrapped
    return wrapped.ptr


_T_ARG_ARRAY = ffi.typeof("gk_jit_arg[]")
_T_CHARS = ffi.typeof("char[]")
_newp = ffi.new


def _device_address(a):
    """The data pointer of a CUDA PyTorch tensor or CuPy array, read the cheap way (their
    __cuda_array_interface__ builds a dict on every access); None for anything else."""
    module = type(a).__module__
    if module.startswith("torch"):
        return a.data_ptr() if getattr(a, "is_cuda", False) else None
    if module.startswith("cupy"):
        data = getattr(a, "data", None)
        return getattr(data, "ptr", None)
    return None


# Per argument type, how it becomes a gk_jit_arg: (slot, value, keep, index) -> None. Filled
# as types are first seen (only types whose conversion depends on the type alone).
def _put_tensor(slot, a, keep, i):
    slot.kind = _ARG_TENSOR
    slot.value.tensor = a._t


def _put_int(slot, a, keep, i):
    if not -0x80000000 <= a <= 0x7FFFFFFF:
        raise OverflowError(f"argument {i}: {a} does not fit a 32-bit int; pass np.int64 or "
                            "np.uint64 for a 64-bit parameter")
    slot.kind = _ARG_I32
    slot.value.i32 = a


def _put_float(slot, a, keep, i):
    slot.kind = _ARG_F32
    slot.value.f32 = a


def _put_bool(slot, a, keep, i):
    slot.kind = _ARG_I32
    slot.value.i32 = int(a)


def _put_scalar(kind, field):
    """The put of a NumPy scalar type: cffi converts it by __float__ / __index__."""
    def put_i32(slot, a, keep, i):
        slot.kind = kind
        slot.value.i32 = a

    def put_u32(slot, a, keep, i):
        slot.kind = kind
        slot.value.u32 = a

    def put_i64(slot, a, keep, i):
        slot.kind = kind
        slot.value.i64 = a

    def put_u64(slot, a, keep, i):
        slot.kind = kind
        slot.value.u64 = a

    def put_f32(slot, a, keep, i):
        slot.kind = kind
        slot.value.f32 = a

    def put_f64(slot, a, keep, i):
        slot.kind = kind
        slot.value.f64 = a

    return {"i32": put_i32, "u32": put_u32, "i64": put_i64, "u64": put_u64, "f32": put_f32,
            "f64": put_f64}[field]


def _put_bytes(slot, a, keep, i):
    raw = a.tobytes() if isinstance(a, (np.void, np.ndarray, np.generic)) else bytes(a)
    if not raw:
        raise ValueError(f"argument {i} is empty bytes")
    buf = _newp(_T_CHARS, raw)
    keep.append(buf)
    slot.kind, slot.size = _ARG_BYTES, len(raw)
    slot.value.bytes = buf


def _put_array(slot, a, keep, i):
    """A PyTorch tensor or CuPy array: its pointer when on a CUDA device, else DLPack."""
    address = _device_address(a)
    if address is not None:
        slot.kind = _ARG_POINTER
        slot.value.u64 = address  # the union's pointer, written as its integer
    else:
        _put_foreign(slot, a, keep, i)


def _put_cupy(slot, a, keep, i):
    """A CuPy ndarray (always on a CUDA device): its data pointer."""
    slot.kind = _ARG_POINTER
    slot.value.u64 = a.data.ptr


def _put_torch(slot, a, keep, i):
    """A PyTorch tensor: its data pointer when on a CUDA device, else DLPack."""
    if a.is_cuda:
        slot.kind = _ARG_POINTER
        slot.value.u64 = a.data_ptr()
    else:
        _put_foreign(slot, a, keep, i)


def _put_foreign(slot, a, keep, i):
    if a is None:
        slot.kind, slot.value.u64 = _ARG_POINTER, 0
    elif hasattr(a, "__cuda_array_interface__"):
        slot.kind = _ARG_POINTER
        slot.value.u64 = a.__cuda_array_interface__["data"][0]
    elif hasattr(a, "__dlpack__"):
        imported = from_dlpack(a)
        keep.append(imported)
        _put_tensor(slot, imported, keep, i)
    else:
        raise TypeError(f"argument {i}: {type(a).__name__} is no kernel argument (a GPUArray, "
                        "a DLPack/CUDA array, a number, a NumPy scalar or bytes)")


_PUT = {GPUArray: _put_tensor, int: _put_int, float: _put_float, bool: _put_bool,
        np.bool_: _put_bool, bytes: _put_bytes, bytearray: _put_bytes}
for _dt, (_kind, _field) in _NP_SCALAR_KIND.items():
    _PUT[_dt.type] = _put_scalar(_kind, _field)


def _converter(a):
    t = type(a)
    if t.__module__.startswith("cupy") and t.__name__ == "ndarray":
        put = _put_cupy
    elif t.__module__.startswith("torch") and hasattr(a, "data_ptr") and hasattr(a, "is_cuda"):
        put = _put_torch
    elif t.__module__.startswith(("torch", "cupy")):
        put = _put_array
    elif isinstance(a, (np.void, np.ndarray, np.generic)):
        put = _put_bytes
    elif isinstance(a, numbers.Integral):
        put = _put_int
    elif isinstance(a, numbers.Real):
        put = _put_float
    else:
        return _put_foreign  # decided per value: not cached
    _PUT[t] = put
    return put


def _pack(args):
    """The gk_jit_arg array of `args`, and what keeps its memory alive until the launch."""
    n = len(args)
    array = _newp(_T_ARG_ARRAY, n or 1)
    keep = []
    get = _PUT.get
    for i, a in enumerate(args):
        (get(type(a)) or _converter(a))(array[i], a, keep, i)
    return array, n, keep


# The fast path of a launch: for a tuple of argument types that each convert the same way
# every time, one generated function checks the types and writes the whole gk_jit_arg array
# with a single struct.pack_into (16 bytes per argument: kind, size, 8-byte value). Per
# argument, the general path above costs a Python call and several cffi field writes.
_ARG_LAYOUT = struct.Struct("=ii8x")
assert _ARG_LAYOUT.size == ffi.sizeof("gk_jit_arg")
# type -> (kind, struct code of the value padded to 8 bytes, expression of argument `a`).
_PACKED_TYPES = {GPUArray: (_ARG_TENSOR, "Q", "{a}._taddr"),
                 int: (_ARG_I32, "i4x", "{a}"), float: (_ARG_F32, "f4x", "{a}"),
                 bool: (_ARG_I32, "i4x", "{a}")}
_STRUCT_CODES = {"i32": "i4x", "u32": "I4x", "i64": "q", "u64": "Q", "f32": "f4x", "f64": "d"}
for _dt, (_kind, _field) in _NP_SCALAR_KIND.items():
    _PACKED_TYPES[_dt.type] = (_kind, _STRUCT_CODES[_field], "{a}")
_PACKERS = {}  # tuple of argument types -> generated packer, or None when a type has none
_NOT_GENERATED = object()


def _cupy_layout(t):
    """(kind, code, expression) of a CuPy ndarray type: its data pointer; None otherwise."""
    if t.__module__.startswith("cupy") and t.__name__ == "ndarray":
        return (_ARG_POINTER, "Q", "{a}.data.ptr")
    return None


def _packer_for(types):
    """The packer of argument types `types`: ``pack(args, buffer) -> bool``, False when the
    arguments' types differ from `types` (the caller then takes the general path); raises
    struct.error or OverflowError for a value the layout cannot hold (an int past 32 bits)."""
    try:
        return _PACKERS[types]
    except KeyError:
        pass
    layouts = [_PACKED_TYPES.get(t) or _cupy_layout(t) for t in types]
    if any(x is None for x in layouts):
        _PACKERS[types] = None
        return None
    names = [f"a{i}" for i in range(len(types))]
    fmt = "=" + "".join("ii" + code for _, code, _ in layouts)
    values = ", ".join(f"{kind}, 0, {expr.format(a=a)}"
                       for (kind, _, expr), a in zip(layouts, names))
    checks = " or ".join(f"type({a}) is not T{i}" for i, a in enumerate(names)) or "False"
    unpack = f"    {', '.join(names)}, = args\n" if names else ""
    source = (f"def pack(args, buffer):\n"
              f"    if len(args) != {len(types)}:\n        return False\n"
              f"{unpack}"
              f"    if {checks}:\n        return False\n"
              f"    pack_into(buffer, 0{', ' + values if values else ''})\n"
              f"    return True\n")
    scope = {f"T{i}": t for i, t in enumerate(types)}
    scope["pack_into"] = struct.Struct(fmt).pack_into
    exec(source, scope)  # noqa: S102 - the source is built above from fixed fragments
    _PACKERS[types] = scope["pack"]
    return scope["pack"]


def _cupy_ordinal(a) -> int:
    return a.data.device_id


def _torch_ordinal(a) -> int:
    return a.get_device()  # -1 on the CPU


_ORDINAL_READERS = {}  # type -> its reader below, filled as types are first seen


def _ordinal_reader(t):
    """How to read the CUDA ordinal of an array of type `t` without DLPack (CuPy's ndarray,
    PyTorch's Tensor: -1 when on the CPU), or None for other types. A launch on such arrays
    would otherwise go through __dlpack_device__ and a device lookup by name every time."""
    try:
        return _ORDINAL_READERS[t]
    except KeyError:
        pass
    reader = None
    if t.__module__.startswith("cupy") and t.__name__ == "ndarray":
        reader = _cupy_ordinal
    elif t.__module__.startswith("torch") and hasattr(t, "get_device"):
        reader = _torch_ordinal
    _ORDINAL_READERS[t] = reader
    return reader


def _device_of_args(args, runtime) -> Device:
    """The device of the first array argument, else the runtime's default device."""
    for a in args:
        if type(a) is GPUArray:
            return a._device
        if isinstance(a, GPUArray):
            return a.device
        if hasattr(a, "__dlpack_device__"):
            kind, index = a.__dlpack_device__()
            if int(kind) in (2, 13):
                return runtime.device(f"cuda:{int(index)}")
            break
    return runtime.default_device()
