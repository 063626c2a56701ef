"""Custom GPU kernels compiled at run time by NVRTC (C ABI 1.8, gpukit_jit.h):
``RawModule``, ``RawKernel`` and ``ElementwiseKernel``, modelled on CuPy's, plus the disk
cache's ``cache_info`` / ``clear_cache``, and ``register_op`` (ABI 1.10), which makes a kernel
an implementation of a named op that dispatch and ``explain`` see. See docs/jit.md.

Arguments of a launch, in the kernel's parameter order:
  * GPUArray: its device pointer (GPUkit pins evictable memory for the launch);
  * any object with ``__cuda_array_interface__`` (PyTorch, CuPy tensors): its data pointer,
    no copy; other DLPack producers (JAX): imported with DLPack, no copy;
  * NumPy scalars: their exact type (np.float32 -> float, np.int64 -> long long, ...);
  * Python int -> int (32-bit) and float -> float (32-bit); bool -> int. Pass NumPy scalars
    for other widths: the launch checks each argument's size against the kernel's
    parameter (when the driver reports them) and says which one differs;
  * bytes / bytearray / a NumPy structured scalar or 0-d array: passed by value (a struct).
"""
from __future__ import annotations

import math
import numbers
import re
import struct
import threading

import numpy as np

from ._array import GPUArray, _gk_dtype, _np_dtype, empty, from_dlpack
from ._lib import check, ffi, lib
from ._runtime import Device, Stream, _open_task_streams, current_stream, runtime as _runtime

__all__ = ["RawModule", "RawKernel", "ElementwiseKernel", "JitOp", "register_op", "cache_info",
           "clear_cache"]



def _parameter_type(function: str, index: int):
    """The ctype of parameter `index` of C function `function`, taken from its parsed
    declaration. ffi.new("gk_x*") would run cffi's C parser over every declared type name the
    first time it sees the string (tens of milliseconds each on a loaded host, several per
    first use of a kernel); this costs a dictionary lookup."""
    return ffi.typeof(getattr(lib, function)).args[index]


_T_OPTIONS_P = _parameter_type("gk_jit_compile", 3)           # gk_jit_options*
_T_MODULE_PP = _parameter_type("gk_jit_compile", 4)           # gk_jit_module**
_T_INFO_P = _parameter_type("gk_jit_module_info_get", 1)      # gk_jit_module_info*
_T_CHARS_PP = _parameter_type("gk_jit_lowered_name", 2)       # const char**
_T_KERNEL_PP = _parameter_type("gk_jit_get_kernel", 2)        # gk_jit_kernel**
_T_LAUNCH_P = _parameter_type("gk_jit_launch", 1)             # gk_jit_launch_args*
_T_OP_OPTIONS_P = _parameter_type("gk_jit_op_register", 3)    # gk_jit_op_options*
_T_OP_PP = _parameter_type("gk_jit_op_register", 4)           # gk_jit_op**

# cffi looks a library function up on its first use (tens of microseconds each): the
# release functions are looked up here, at import, rather than in a kernel's first use.
_MODULE_RELEASE = lib.gk_jit_module_release
_KERNEL_RELEASE = lib.gk_jit_kernel_release

_ORIGINS = {1: "compiled", 2: "disk_cache", 3: "memory"}

_ARG_TENSOR, _ARG_I32, _ARG_I64, _ARG_F32, _ARG_F64, _ARG_POINTER, _ARG_BYTES, _ARG_U32, \
    _ARG_U64 = 1, 2, 3, 4, 5, 6, 7, 8, 9
_NP_SCALAR_KIND = {np.dtype(np.float32): (_ARG_F32, "f32"), np.dtype(np.float64): (_ARG_F64, "f64"),
                   np.dtype(np.int32): (_ARG_I32, "i32"), np.dtype(np.int64): (_ARG_I64, "i64"),
                   np.dtype(np.uint32): (_ARG_U32, "u32"), np.dtype(np.uint64): (_ARG_U64, "u64")}


def _strings(values, what: str) -> list:
    if isinstance(values, (str, bytes)):
        values = (values,)
    out = []
    for v in values:
        if not isinstance(v, str):
            raise TypeError(f"{what} must be strings, got {type(v).__name__}")
        out.append(v)
    return out


def _char_array(values):
    """A `const char* const*` for cffi, and the buffers that keep it alive."""
    keep = [ffi.new("char[]", v.encode()) for v in values]
    array = ffi.new("const char*[]", keep) if keep else ffi.NULL
    return array, keep


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


class RawModule:
    """CUDA C++ source compiled by NVRTC for one device (CuPy's RawModule).

    ``options``: NVRTC options ("-std=c++17", "--use_fast_math", "-DN=4", "-I/dir");
    ``name_expressions``: template instantiations to compile ("kern<float, 4>"), found by
    ``get_function`` under the same text. ``device``: a Device, id or name (default: the
    runtime's default device). ``sm_version``: compile for that SM instead of the device's
    (e.g. 90; on a machine without a GPU this fills the cache but cannot launch).
    ``disk_cache=False`` skips the disk cache. The module is compiled once per runtime,
    device and key; the disk cache ($GPUKIT_CACHE_DIR) serves later processes.
    """

    def __init__(self, code: str, options=(), name_expressions=(), *, device=None,
                 include_paths=(), sm_version: int = 0, name: str = "gpukit_jit.cu",
                 disk_cache: bool = True, runtime=None):
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        rt = runtime or (device.runtime if isinstance(device, Device) else _runtime())
        self.runtime = rt
        self.device = device if isinstance(device, Device) else rt.device(device)
        self.options = tuple(_strings(options, "options"))
        self.name_expressions = tuple(_strings(name_expressions, "name_expressions"))
        opts, keep_o = _char_array(self.options)
        names, keep_n = _char_array(self.name_expressions)
        incs, keep_i = _char_array(_strings(include_paths, "include_paths"))
        o = ffi.new(_T_OPTIONS_P)
        o.struct_size = ffi.sizeof(_T_OPTIONS_P.item)
        o.options, o.num_options = opts, len(self.options)
        o.name_expressions, o.num_name_expressions = names, len(self.name_expressions)
        o.include_paths, o.num_include_paths = incs, len(keep_i)
        o.sm_version = int(sm_version)
        program = ffi.new(_T_CHARS, name.encode())
        o.program_name = program
        o.flags = 0 if disk_cache else 1
        out = ffi.new(_T_MODULE_PP)
        check(lib.gk_jit_compile(rt.ptr, self.device.id, code.encode(), o, out))
        self._ptr = ffi.gc(out[0], _MODULE_RELEASE)
        self._functions = {}
        self._lock = threading.Lock()

    def _info(self):
        info = ffi.new(_T_INFO_P)
        info.struct_size = ffi.sizeof(_T_INFO_P.item)
        check(lib.gk_jit_module_info_get(self._ptr, info))
        return info

    @property
    def sm_version(self) -> int:
        return self._info().sm_version

    @property
    def origin(self) -> str:
        """"compiled" (NVRTC ran), "disk_cache" or "memory" (this process had it)."""
        return _ORIGINS.get(self._info().origin, "unknown")

    @property
    def loaded(self) -> bool:
        """True when the module is loaded on its CUDA device (its kernels can launch)."""
        return bool(self._info().loaded)

    @property
    def key(self) -> str:
        return ffi.string(self._info().key).decode()

    @property
    def cubin(self) -> bytes:
        info = self._info()
        return bytes(ffi.buffer(info.cubin, info.cubin_size))

    @property
    def ptx(self) -> str:
        return ffi.string(self._info().ptx).decode()

    @property
    def log(self) -> str:
        return ffi.string(self._info().log).decode()

    @property
    def cache_path(self) -> str:
        return ffi.string(self._info().cache_path).decode()

    def lowered_name(self, name_expression: str) -> str:
        out = ffi.new(_T_CHARS_PP)
        check(lib.gk_jit_lowered_name(self._ptr, name_expression.encode(), out))
        return ffi.string(out[0]).decode()

    def get_function(self, name: str) -> "Function":
        """The kernel `name`: a name expression of the compile, an extern "C" kernel's name
        or a mangled name. Unavailable when the module is not loaded (no CUDA device, or
        compiled for another SM)."""
        with self._lock:
            fn = self._functions.get(name)
            if fn is None:
                out = ffi.new(_T_KERNEL_PP)
                check(lib.gk_jit_get_kernel(self._ptr, name.encode(), out))
                fn = Function(self, name, ffi.gc(out[0], _KERNEL_RELEASE))
                self._functions[name] = fn
            return fn

    def __repr__(self):
        return (f"RawModule(device={self.device}, sm_{self.sm_version}, origin={self.origin}, "
                f"key={self.key[:12]})")


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


class Function:
    """One kernel of a RawModule: ``f(grid, block, args, shared_mem=0, stream=None)``."""

    def __init__(self, module: RawModule, name: str, ptr):
        self.module = module
        self.name = name
        self._ptr = ptr
        self._launch = ffi.new(_T_LAUNCH_P)
        self._launch.struct_size = ffi.sizeof(_T_LAUNCH_P.item)
        # Reused by every launch under the lock (the C call copies what it reads): no
        # allocation per call. The grid and block last written are kept to skip rewriting.
        self._args = _newp(_T_ARG_ARRAY, 8)
        self._args_buffer = ffi.buffer(self._args)
        self._launch.args = self._args
        self._packer = None  # of the last launch's argument types (see _packer_for)
        self._general_types = None  # of the last launch that had no packer
        self._grid = self._block = None
        self._shared_mem, self._num_args, self._stream = 0, 0, ffi.NULL
        self._launch_lock = threading.Lock()

    def __call__(self, grid, block, args, shared_mem: int = 0, stream=None) -> None:
        if type(args) is not tuple and not isinstance(args, (tuple, list)):
            raise TypeError("args must be a tuple or list of kernel arguments")
        stream_ptr = ffi.NULL if stream is None and not _open_task_streams[0] else \
            _stream_ptr(stream, self.module.device)
        keep = None  # what the general path must keep alive until the launch has read it
        n = len(args)
        with self._launch_lock:  # one launch struct and argument array per kernel
            l = self._launch
            # Tuples and ints compare cheaply; anything else is converted every time.
            if type(grid) is not tuple and type(grid) is not int:
                l.grid, self._grid = _dims(grid, "grid"), None
            elif grid != self._grid:
                l.grid = _dims(grid, "grid")
                self._grid = grid
            if type(block) is not tuple and type(block) is not int:
                l.block, self._block = _dims(block, "block"), None
            elif block != self._block:
                l.block = _dims(block, "block")
                self._block = block
            if n > len(self._args):
                self._args = _newp(_T_ARG_ARRAY, n)
                self._args_buffer = ffi.buffer(self._args)
                l.args = self._args
            pack = self._packer
            try:
                packed = pack is not None and pack(args, self._args_buffer)
            except (struct.error, OverflowError):  # the general path names the argument
                packed = False
            if not packed:
                keep = self._pack_general(args)
            if shared_mem != self._shared_mem:
                l.shared_mem_bytes = shared_mem
                self._shared_mem = l.shared_mem_bytes
            if n != self._num_args:
                l.num_args = self._num_args = n
            if stream_ptr is not self._stream:
                l.stream = self._stream = stream_ptr
            status = lib.gk_jit_launch(self._ptr, l)
        if status:
            check(status)
        del keep  # the launch has read the arguments

    def _pack_general(self, args):
        """Writes the argument array for types the last packer does not take: with the
        packer of these types when they have one (kept for the next launch), else argument
        by argument. Returns what must stay alive until the launch (DLPack imports)."""
        types = tuple(map(type, args))
        pack = _PACKERS.get(types, _NOT_GENERATED)
        if pack is _NOT_GENERATED:
            # Generating costs a few hundred microseconds: worth it from the second launch
            # with the same types on, not for a kernel launched once.
            pack = _packer_for(types) if types == self._general_types else None
            self._general_types = types
        if pack is not None:
            try:
                if pack(args, self._args_buffer):
                    self._packer = pack
                    return None
            except (struct.error, OverflowError):
                pass  # a value out of its type's range: the converters below say which
        keep = []
        get = _PUT.get
        array = self._args
        for i, a in enumerate(args):
            (get(type(a)) or _converter(a))(array[i], a, keep, i)
        return keep

    def __repr__(self):
        return f"Function({self.name!r}, {self.module!r})"


class RawKernel:
    """One kernel from CUDA C++ source (CuPy's RawKernel):
    ``RawKernel(src, name, options=())(grid, block, args, shared_mem=0, stream=None)``.
    Compiled on first call for the device of the first array argument (else the default
    device), once per device; later processes read it from the disk cache."""

    def __init__(self, code: str, name: str, options=(), *, name_expressions=None,
                 include_paths=(), runtime=None):
        self.code = code
        self.name = name
        self.options = tuple(_strings(options, "options"))
        self._name_expressions = tuple(name_expressions) if name_expressions else ()
        self._include_paths = tuple(include_paths)
        self._runtime = runtime
        self._by_device = {}
        self._last = (None, None)  # (device, Function) of the last call with a GPUArray
        self._lock = threading.Lock()

    def _function(self, device: Device) -> Function:
        key = (id(device.runtime), device.id)
        fn = self._by_device.get(key)
        if fn is None:
            with self._lock:
                fn = self._by_device.get(key)
                if fn is None:
                    module = RawModule(self.code, self.options, self._name_expressions,
                                       device=device, include_paths=self._include_paths)
                    fn = module.get_function(self.name)
                    self._by_device[key] = fn
        return fn

    def register_op(self, op: str, dtypes, *, priority: int = 100, block_size: int = 256,
                    device=None) -> "JitOp":
        """Registers this kernel for op `op` on `device` (see gpukit.register_op)."""
        return register_op(op, self, dtypes, priority=priority, block_size=block_size,
                           device=device)

    def compile(self, device=None) -> RawModule:
        """Compiles (or finds in the caches) the module for `device` now; returns it."""
        rt = self._runtime or _runtime()
        dev = device if isinstance(device, Device) else rt.device(device)
        return self._function(dev).module

    def __call__(self, grid, block, args, shared_mem: int = 0, stream=None) -> None:
        if type(args) is not tuple and not isinstance(args, (tuple, list)):
            raise TypeError("args must be a tuple or list of kernel arguments")
        # The common case first: a GPUArray as first argument, on the device of the last call.
        first = args[0] if args else None
        if type(first) is GPUArray:
            device = first._device
            last = self._last  # one tuple: read whole even while another thread replaces it
            if device is last[0]:
                return last[1](grid, block, args, shared_mem, stream)
            fn = self._by_device.get((id(device.runtime), device.id))
            if fn is not None:
                self._last = (device, fn)
                return fn(grid, block, args, shared_mem, stream)
        device = _device_of_args(args, self._runtime or _runtime())
        self._function(device)(grid, block, args, shared_mem, stream)


# A kernel serving a named op ---------------------------------------------------------

_GEOMETRY_ELEMENTWISE = 1
# Registrations stay until released: dropping the handle does not unregister (a forgotten
# handle would otherwise take the kernel out of dispatch at some garbage collection).
_registrations = set()
_registrations_lock = threading.Lock()


class JitOp:
    """A JIT kernel registered as an implementation of a named op (gk_jit_op_register):
    ``gpukit`` ops and ``gpukit.explain`` see it as ``"jit:<kernel name>"``. ``release()``
    (or leaving a ``with`` block) unregisters it."""

    def __init__(self, op: str, function: "Function", ptr, priority: int, block_size: int):
        self.op = op
        self.function = function
        self.name = "jit:" + function.name
        self.priority = priority
        self.block_size = block_size
        self._ptr = ptr

    def release(self) -> None:
        """Unregisters: later calls of the op no longer consider the kernel. Idempotent."""
        with _registrations_lock:
            ptr, self._ptr = self._ptr, None
            _registrations.discard(self)
        if ptr is not None:
            lib.gk_jit_op_release(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        state = "registered" if self._ptr is not None else "released"
        return f"JitOp({self.op!r}, {self.name!r}, priority={self.priority}, {state})"


def register_op(op: str, kernel, dtypes, *, priority: int = 100, block_size: int = 256,
                device=None) -> JitOp:
    """Registers a kernel as an implementation of op `op` for input-0 dtypes `dtypes` (names
    such as "f32", NumPy dtypes) on the kernel's device, with the elementwise geometry: the
    kernel takes the inputs' pointers, the outputs' pointers and the element count as a
    ``long long``, and is launched with one thread per output element in blocks of
    `block_size` (docs/jit.md, "A kernel serving an op"). `kernel` is a Function
    (``RawModule.get_function``) or a RawKernel (compiled for `device`, default: the
    default device). The highest `priority` among the kernels and plugins that accept a call
    serves it (plugins: cpu 0, CUDA 50-80). Returns a JitOp; it stays registered until
    ``release()``."""
    if isinstance(kernel, RawKernel):
        rt = kernel._runtime or _runtime()
        dev = device if isinstance(device, Device) else rt.device(device)
        function = kernel._function(dev)
    elif isinstance(kernel, Function):
        function = kernel
    else:
        raise TypeError(f"kernel must be a gpukit.RawKernel or a Function of a RawModule, got "
                        f"{type(kernel).__name__}")
    if not isinstance(op, str):
        raise TypeError(f"op must be an op name (str), got {type(op).__name__}")
    if isinstance(dtypes, (str, np.dtype, type)):
        dtypes = (dtypes,)
    codes = [_gk_dtype(d) for d in dtypes]
    if not codes:
        raise ValueError("dtypes is empty: name the input dtypes the kernel serves")
    codes_c = ffi.new("int32_t[]", codes)
    o = ffi.new(_T_OP_OPTIONS_P)
    o.struct_size = ffi.sizeof(_T_OP_OPTIONS_P.item)
    o.dtypes, o.num_dtypes = codes_c, len(codes)
    o.priority = int(priority)
    o.geometry = _GEOMETRY_ELEMENTWISE
    o.block_size = int(block_size)
    out = ffi.new(_T_OP_PP)
    check(lib.gk_jit_op_register(function.module.runtime.ptr, op.encode(), function._ptr, o,
                                 out))
    registration = JitOp(op, function, out[0], int(priority), int(block_size) or 256)
    with _registrations_lock:
        _registrations.add(registration)
    return registration


# ElementwiseKernel ---------------------------------------------------------------------

_C_TYPES = {1: "float", 2: "double", 3: "__half", 4: "__nv_bfloat16", 5: "signed char",
            6: "short", 7: "int", 8: "long long", 9: "unsigned char", 10: "bool"}
_TYPE_NAMES = {"float32": 1, "float": 1, "float64": 2, "double": 2, "float16": 3, "half": 3,
               "bfloat16": 4, "int8": 5, "int16": 6, "int32": 7, "int": 7, "int64": 8,
               "uint8": 9, "bool": 10}
_PARAM = re.compile(r"^\s*(raw\s+)?([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*$")
_MAX_DIMS = 8


def _parse_params(text: str, what: str) -> list:
    params = []
    for piece in [p for p in text.split(",") if p.strip()]:
        m = _PARAM.match(piece)
        if not m or m.group(1):
            raise ValueError(f"{what}: '{piece.strip()}' is not 'type name' (a dtype such as "
                             "float32, or a one-letter type placeholder such as T)")
        type_name, name = m.group(2), m.group(3)
        if type_name not in _TYPE_NAMES and not re.fullmatch(r"[A-Z]", type_name):
            raise ValueError(f"{what}: type '{type_name}' of '{name}' is neither a dtype "
                             f"({', '.join(sorted(_TYPE_NAMES))}) nor a one-letter placeholder")
        params.append((type_name, name))
    return params


def _broadcast_shape(shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        extent = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if extent not in (1, s[k]):
                raise ValueError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not "
                                 "broadcast")
            extent = s[k]
        out.append(extent)
    return tuple(out)


class ElementwiseKernel:
    """A kernel from one element's operation (CuPy's ElementwiseKernel):
    ``ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")(x, y)`` returns z.

    Parameters are "type name" with a dtype (float32, int64, ...) or a one-letter placeholder
    (T) bound to the dtype of the first input that uses it. Inputs may be GPUArrays, DLPack
    producers (torch, CuPy, JAX tensors: no copy) or Python/NumPy scalars; inputs broadcast
    as NumPy does, and outputs (given after the inputs, or allocated as GPUArrays on the
    inputs' device) take the broadcast shape. One kernel is compiled per dtype combination,
    rank and layout (contiguous alike, or strided); shapes and strides are launch arguments.
    ``preamble`` is code placed before the kernel (helper functions, #include lines)."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str,
                 options=(), preamble: str = ""):
        self.in_params = _parse_params(in_params, "in_params")
        self.out_params = _parse_params(out_params, "out_params")
        if not self.out_params:
            raise ValueError("out_params names no output")
        names = [n for _, n in self.in_params + self.out_params]
        if len(set(names)) != len(names):
            raise ValueError(f"parameter names repeat: {names}")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ValueError(f"name '{name}' is not a C identifier")
        self.operation = operation
        self.name = name
        self.options = tuple(_strings(options, "options"))
        self.preamble = preamble
        self._kernels = {}
        self._lock = threading.Lock()

    def _source(self, types: dict, kinds: list, ndim: int, contiguous: bool) -> str:
        """The kernel for one binding: kinds[i] is "array" or "scalar" per parameter."""
        params = self.in_params + self.out_params
        lines = []
        if 3 in types.values():
            lines.append("#include <cuda_fp16.h>")
        if 4 in types.values():
            lines.append("#include <cuda_bf16.h>")
        lines.append(self.preamble)
        for placeholder, gk in sorted(types.items()):
            if len(placeholder) == 1:
                lines.append(f"typedef {_C_TYPES[gk]} {placeholder};")
        num_arrays = sum(1 for k in kinds if k == "array")
        if not contiguous:
            lines.append(f"struct {self.name}_index {{ long long shape[{max(ndim, 1)}]; "
                         f"long long stride[{max(num_arrays, 1)}][{max(ndim, 1)}]; }};")
        sig = []
        for (type_name, pname), kind in zip(params, kinds):
            ctype = _C_TYPES[types[type_name]]
            sig.append(f"{ctype}* {pname}_ptr" if kind == "array"
                       else f"{ctype} {pname}")
        if not contiguous:
            sig.append(f"{self.name}_index index")
        sig.append("long long n")
        body = [f'extern "C" __global__ void {self.name}({", ".join(sig)}) {{',
                "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;",
                "       i += (long long)gridDim.x * blockDim.x) {"]
        if contiguous:
            offsets = ["i"] * num_arrays
        else:
            offsets = [f"o{k}" for k in range(num_arrays)]
            body.append("    " + " ".join(f"long long o{k} = 0;" for k in range(num_arrays)))
            body.append("    long long rest = i;")
            body.append(f"    for (int d = {ndim - 1}; d >= 0; --d) {{")
            body.append("      long long c = rest % index.shape[d];")
            body.append("      rest /= index.shape[d];")
            for k in range(num_arrays):
                body.append(f"      o{k} += c * index.stride[{k}][d];")
            body.append("    }")
        a = 0
        for (type_name, pname), kind in zip(params, kinds):
            if kind == "array":
                body.append(f"    {_C_TYPES[types[type_name]]}& {pname} = {pname}_ptr[{offsets[a]}];")
                a += 1
        body.append(f"    {self.operation};")
        body += ["  }", "}"]
        return "\n".join(lines + body) + "\n"

    def __call__(self, *args, size=None, block_size: int = 256, stream=None):
        n_in, n_out = len(self.in_params), len(self.out_params)
        if len(args) not in (n_in, n_in + n_out):
            raise TypeError(f"{self.name} takes {n_in} inputs (and optionally {n_out} outputs); "
                            f"{len(args)} arguments given")
        rt = _runtime()
        values, kinds, types = [], [], {}
        device = None
        # Arrays bind the placeholders first; scalars take the type their parameter has.
        for (type_name, pname), a in zip(self.in_params, args[:n_in]):
            if isinstance(a, (numbers.Number, np.generic)) and not isinstance(a, np.ndarray):
                kinds.append("scalar")
                values.append(a)
                continue
            arr = a if isinstance(a, GPUArray) else from_dlpack(a)
            if device is None:
                device = arr.device
            elif arr.device != device:
                raise ValueError(f"{self.name}: input '{pname}' is on {arr.device}, the "
                                 f"first array input on {device}")
            kinds.append("array")
            values.append(arr)
            want = _TYPE_NAMES.get(type_name) or types.setdefault(type_name, arr._gk_dtype)
            if want != arr._gk_dtype:
                raise TypeError(f"{self.name}: input '{pname}' is {arr.dtype_name} but "
                                f"{type_name} is {_C_TYPES[want]} here")
        for (type_name, pname), a, kind in zip(self.in_params, values, kinds):
            if type_name in _TYPE_NAMES:
                types[type_name] = _TYPE_NAMES[type_name]
            elif kind == "scalar" and type_name not in types:
                types[type_name] = _gk_dtype(np.float32 if isinstance(a, float)
                                             else np.asarray(a).dtype)
        if device is None:
            device = rt.default_device()
        shape = _broadcast_shape([v.shape for v, k in zip(values, kinds) if k == "array"])
        if size is not None:
            shape = (int(size),) if not shape else shape
        outs = list(args[n_in:])
        for type_name, pname in self.out_params:
            if type_name in _TYPE_NAMES:
                types[type_name] = _TYPE_NAMES[type_name]
            elif type_name not in types:
                if outs:
                    continue  # bound below from the given output
                raise TypeError(f"{self.name}: output '{pname}' has type {type_name}, which no "
                                "input binds; pass the output array")
        out_arrays = []
        for i, (type_name, pname) in enumerate(self.out_params):
            if outs:
                o = outs[i] if isinstance(outs[i], GPUArray) else from_dlpack(outs[i])
                if o.shape != shape:
                    raise ValueError(f"{self.name}: output '{pname}' has shape {o.shape}; the "
                                     f"inputs broadcast to {shape}")
                types.setdefault(type_name, o._gk_dtype)
                if types[type_name] != o._gk_dtype:
                    raise TypeError(f"{self.name}: output '{pname}' is {o.dtype_name}, the "
                                    f"kernel binds {type_name} to another dtype")
            else:
                o = empty(shape, dtype=_np_dtype(types[type_name]), device=device)
            out_arrays.append(o)
            values.append(o)
            kinds.append("array")
        arrays = [v for v, k in zip(values, kinds) if k == "array"]
        ndim = len(shape)
        if ndim > _MAX_DIMS:
            raise ValueError(f"{self.name}: {ndim} dimensions; at most {_MAX_DIMS}")
        n = math.prod(shape)
        contiguous = all(a.shape == shape and a.is_contiguous for a in arrays)
        key = (id(rt), device.id, tuple(sorted(types.items())), tuple(kinds), ndim, contiguous)
        fn = self._kernels.get(key)
        if fn is None:
            with self._lock:
                fn = self._kernels.get(key)
                if fn is None:
                    source = self._source(types, kinds, ndim, contiguous)
                    module = RawModule(source, self.options, device=device,
                                       name=f"{self.name}.cu")
                    fn = module.get_function(self.name)
                    self._kernels[key] = fn
        if n == 0:
            return out_arrays[0] if n_out == 1 else tuple(out_arrays)
        launch_args = []
        for (type_name, _), v, k in zip(self.in_params + self.out_params, values, kinds):
            if k == "array":
                launch_args.append(v)
            else:
                launch_args.append(np.asarray(v).astype(_np_dtype(types[type_name]))[()]
                                   if types[type_name] in (1, 2, 7, 8) else
                                   np.asarray(v).astype(_np_dtype(types[type_name])).tobytes())
        if not contiguous:
            launch_args.append(self._index_bytes(shape, arrays))
        launch_args.append(np.int64(n))
        grid = min(-(-n // block_size), 65535 * 8)
        fn(grid, block_size, launch_args, stream=stream)
        return out_arrays[0] if n_out == 1 else tuple(out_arrays)

    @staticmethod
    def _index_bytes(shape, arrays) -> bytes:
        ndim = max(len(shape), 1)
        index = np.zeros(ndim + len(arrays) * ndim, dtype=np.int64)
        index[:len(shape)] = shape
        for k, a in enumerate(arrays):
            strides = a.element_strides
            offset = len(shape) - a.ndim
            for d in range(a.ndim):
                # A broadcast dimension (extent 1 against a larger one) steps by 0.
                if a.shape[d] != 1 or shape[d + offset] == 1:
                    index[ndim + k * ndim + d + offset] = strides[d]
        return index.tobytes()


def cache_info() -> dict:
    """The disk cache: {"dir", "entries", "bytes", "limit_bytes"} (gk_jit_cache_stats_get)."""
    s = ffi.new("gk_jit_cache_stats*")
    s.struct_size = ffi.sizeof("gk_jit_cache_stats")
    check(lib.gk_jit_cache_stats_get(s))
    return {"dir": ffi.string(s.dir).decode(), "entries": s.entries, "bytes": s.bytes,
            "limit_bytes": s.limit_bytes}


def clear_cache() -> int:
    """Empties the disk cache; returns the number of entries removed."""
    out = ffi.new("int64_t*")
    check(lib.gk_jit_cache_clear(out))
    return int(out[0])
