"""RawModule (CUDA C++ compiled by NVRTC for one device) and Function, one kernel of it and
its launch.
"""
from __future__ import annotations

import struct
import threading

from ._jit_args import (_NOT_GENERATED, _PACKERS, _PUT, _T_ARG_ARRAY, _T_CHARS, _converter,
                        _dims, _newp, _packer_for, _stream_ptr)
from ._lib import check, ffi, lib
from ._runtime import Device, _open_task_streams, runtime as _runtime


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
_OPTIONS_SIZE = ffi.sizeof(_T_OPTIONS_P.item)
_INFO_SIZE = ffi.sizeof(_T_INFO_P.item)
_LAUNCH_SIZE = ffi.sizeof(_T_LAUNCH_P.item)

# cffi looks a library function up on its first use (tens of microseconds each): the
# release functions are looked up here, at import, rather than in a kernel's first use.
_MODULE_RELEASE = lib.gk_jit_module_release
_KERNEL_RELEASE = lib.gk_jit_kernel_release

_ORIGINS = {1: "compiled", 2: "disk_cache", 3: "memory"}


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
    if not values:
        return ffi.NULL, ()
    keep = [ffi.new(_T_CHARS, v.encode()) for v in values]
    return ffi.new("const char*[]", keep), keep


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
        o.struct_size = _OPTIONS_SIZE
        o.options, o.num_options = opts, len(self.options)
        o.name_expressions, o.num_name_expressions = names, len(self.name_expressions)
        o.include_paths, o.num_include_paths = incs, len(keep_i)
        o.sm_version = int(sm_version)
        program = ffi.new(_T_CHARS, name.encode()) if name != "gpukit_jit.cu" else ffi.NULL
        o.program_name = program  # NULL: the C default, the same name
        o.flags = 0 if disk_cache else 1
        out = ffi.new(_T_MODULE_PP)
        check(lib.gk_jit_compile(rt.ptr, self.device.id, code.encode(), o, out))
        self._ptr = ffi.gc(out[0], _MODULE_RELEASE)
        self._functions = {}
        self._lock = threading.Lock()

    def _info(self):
        info = ffi.new(_T_INFO_P)
        info.struct_size = _INFO_SIZE
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


class _LaunchState:
    """One thread's launch struct and argument array of a Function, reused by every launch
    from that thread (the C call copies what it reads), with what was last written to them
    so that unchanged fields are not written again."""

    __slots__ = ("launch", "args", "args_buffer", "packer", "general_types", "grid", "block",
                 "shared_mem", "num_args", "stream")

    def __init__(self):
        self.launch = ffi.new(_T_LAUNCH_P)
        self.launch.struct_size = _LAUNCH_SIZE
        self.args = _newp(_T_ARG_ARRAY, 8)
        self.args_buffer = ffi.buffer(self.args)
        self.launch.args = self.args
        self.packer = None  # of the last launch's argument types (see _packer_for)
        self.general_types = None  # of the last launch that had no packer
        self.grid = self.block = None
        self.shared_mem, self.num_args, self.stream = 0, 0, ffi.NULL


class Function:
    """One kernel of a RawModule: ``f(grid, block, args, shared_mem=0, stream=None)``.
    Launches from several threads at once are safe: each thread writes its own launch
    struct (a lock around a shared one cost more than the rest of the Python side)."""

    def __init__(self, module: RawModule, name: str, ptr):
        self.module = module
        self.name = name
        self._ptr = ptr
        self._local = threading.local()

    def _state(self) -> _LaunchState:
        """The calling thread's launch state."""
        try:
            return self._local.state
        except AttributeError:
            state = self._local.state = _LaunchState()
            return state

    def __call__(self, grid, block, args, shared_mem: int = 0, stream=None) -> None:
        if type(args) is not tuple and not isinstance(args, (tuple, list)):
            raise TypeError("args must be a tuple or list of kernel arguments")
        stream_ptr = ffi.NULL if stream is None and not _open_task_streams[0] else \
            _stream_ptr(stream, self.module.device)
        try:
            s = self._local.state
        except AttributeError:
            s = self._state()
        l = s.launch
        keep = None  # what the general path must keep alive until the launch has read it
        n = len(args)
        # The same object as last time (a literal tuple is) needs nothing; other tuples and
        # ints compare cheaply; anything else is converted every time.
        if grid is not s.grid:
            if type(grid) is not tuple and type(grid) is not int:
                l.grid, s.grid = _dims(grid, "grid"), None
            elif grid != s.grid:
                l.grid = _dims(grid, "grid")
                s.grid = grid
        if block is not s.block:
            if type(block) is not tuple and type(block) is not int:
                l.block, s.block = _dims(block, "block"), None
            elif block != s.block:
                l.block = _dims(block, "block")
                s.block = block
        if n > len(s.args):
            s.args = _newp(_T_ARG_ARRAY, n)
            s.args_buffer = ffi.buffer(s.args)
            l.args = s.args
        pack = s.packer
        try:
            packed = pack is not None and pack(args, s.args_buffer)
        except (struct.error, OverflowError):  # the general path names the argument
            packed = False
        if not packed:
            keep = self._pack_general(s, args)
        if shared_mem != s.shared_mem:
            l.shared_mem_bytes = shared_mem
            s.shared_mem = l.shared_mem_bytes
        if n != s.num_args:
            l.num_args = s.num_args = n
        if stream_ptr is not s.stream:
            l.stream = s.stream = stream_ptr
        status = lib.gk_jit_launch(self._ptr, l)
        if status:
            check(status)
        del keep  # the launch has read the arguments

    @staticmethod
    def _pack_general(s: _LaunchState, args):
        """Writes the argument array for types the last packer does not take: with the
        packer of these types when they have one (kept for the next launch), else argument
        by argument. Returns what must stay alive until the launch (DLPack imports)."""
        types = tuple(map(type, args))
        pack = _PACKERS.get(types, _NOT_GENERATED)
        if pack is _NOT_GENERATED:
            # Generating costs a few hundred microseconds: worth it from the second launch
            # with the same types on, not for a kernel launched once.
            pack = _packer_for(types) if types == s.general_types else None
            s.general_types = types
        if pack is not None:
            try:
                if pack(args, s.args_buffer):
                    s.packer = pack
                    return None
            except (struct.error, OverflowError):
                pass  # a value out of its type's range: the converters below say which
        keep = []
        get = _PUT.get
        array = s.args
        for i, a in enumerate(args):
            (get(type(a)) or _converter(a))(array[i], a, keep, i)
        return keep

    def __repr__(self):
        return f"Function({self.name!r}, {self.module!r})"
