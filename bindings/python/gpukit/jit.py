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

Here: RawKernel, kernels serving named ops (register_op, JitOp) and the disk cache.
RawModule and Function (a kernel's launch): _jit_module.py; how launch arguments are
packed: _jit_args.py; ElementwiseKernel's code generation: _jit_elementwise.py.
"""
from __future__ import annotations

import threading

import numpy as np

from ._array import GPUArray
from ._dtypes import _gk_dtype
from ._jit_args import _device_of_args, _ordinal_reader
from ._jit_elementwise import ElementwiseKernel
from ._jit_module import Function, RawModule, _parameter_type, _strings
from ._lib import check, ffi, lib
from ._runtime import Device, runtime as _runtime

__all__ = ["RawModule", "RawKernel", "ElementwiseKernel", "JitOp", "register_op", "cache_info",
           "clear_cache"]

_T_OP_OPTIONS_P = _parameter_type("gk_jit_op_register", 3)    # gk_jit_op_options*
_T_OP_PP = _parameter_type("gk_jit_op_register", 4)           # gk_jit_op**


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
        self._last_foreign = (None, None, None, None)  # of the last call with a CuPy/PyTorch array
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
        # The common cases first: the first argument a GPUArray on the device of the last
        # such call, or an array of the same type (CuPy, PyTorch) on the same CUDA ordinal.
        first = args[0] if args else None
        t = type(first)
        if t is GPUArray:
            device = first._device
            last = self._last  # one tuple: read whole even while another thread replaces it
            if device is last[0]:
                return last[1](grid, block, args, shared_mem, stream)
            fn = self._by_device.get((id(device.runtime), device.id))
            if fn is not None:
                self._last = (device, fn)
                return fn(grid, block, args, shared_mem, stream)
        else:
            foreign = self._last_foreign  # (type, ordinal reader, ordinal, Function)
            if t is foreign[0] and foreign[1](first) == foreign[2]:
                return foreign[3](grid, block, args, shared_mem, stream)
        # The runtime is fixed (the given one, else the default, created once per process),
        # so a CUDA ordinal names one device and Function.
        reader = _ordinal_reader(t)
        ordinal = reader(first) if reader is not None else -1
        device = _device_of_args(args, self._runtime or _runtime())
        fn = self._function(device)
        if ordinal >= 0 and device.is_cuda and device.ordinal == ordinal:
            self._last_foreign = (t, reader, ordinal, fn)
        fn(grid, block, args, shared_mem, stream)


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
