"""Runtime, devices, streams, events, plugins, explain and info over the C ABI."""
from __future__ import annotations

import contextvars
import json
import threading

from ._dtypes import _desc_for, _gk_dtype
from ._lib import check, ffi, lib, take_string
from ._units import parse_memory

__all__ = ["Runtime", "Device", "Stream", "Event", "runtime", "devices", "default_device",
           "plugins", "explain", "info", "ops", "current_stream", "set_memory_budget",
           "memory_stats"]

# The stream ops run on when the caller names none: a scheduler task's stream inside
# `with gpukit.task(...)` (set and reset by Task), else None, the device's default stream.
# Context-local, so threads and asyncio tasks each see their own.
_current_stream = contextvars.ContextVar("gpukit_current_stream", default=None)
# How many such blocks are open, in any thread or context. While none is, the op call path
# skips reading the ContextVar: on a cold path (the first call after a wait) that read
# cost about 0.7 µs (perf/python/bench_call_overhead.py --cold). So a context copied inside
# a block (an asyncio task started there) that outlives it sees None once no block is
# open, as every other context does: its task is over.
_open_task_streams = [0]
_open_task_streams_lock = threading.Lock()


def _enter_task_stream(stream):
    """Makes `stream` the current stream until _exit_task_stream(token)."""
    with _open_task_streams_lock:
        _open_task_streams[0] += 1
    return _current_stream.set(stream)


def _exit_task_stream(token) -> None:
    _current_stream.reset(token)
    with _open_task_streams_lock:
        _open_task_streams[0] -= 1

KIND_NAMES = {1: "cpu", 2: "cuda"}


class Runtime:
    """A GPUkit runtime (gk_runtime). Most code uses the lazily created default one,
    :func:`runtime`. Arrays, streams and events keep what they need alive, so a Runtime
    may be dropped before them."""

    def __init__(self, devices: str | None = None, plugin_path: str | None = None,
                 plugins_disable: str | None = None, ignore_environment: bool = False,
                 no_default_plugins: bool = False, log_level: int | None = None):
        opts = ffi.new("gk_runtime_options*")
        opts.struct_size = ffi.sizeof("gk_runtime_options")
        opts.abi_version = (lib.GK_ABI_VERSION_MAJOR << 16) | lib.GK_ABI_VERSION_MINOR
        opts.flags = ((lib.GK_RUNTIME_IGNORE_ENVIRONMENT if ignore_environment else 0)
                      | (lib.GK_RUNTIME_NO_DEFAULT_PLUGINS if no_default_plugins else 0))
        keep = []

        def cstr(s):
            if s is None:
                return ffi.NULL
            keep.append(ffi.new("char[]", s.encode()))
            return keep[-1]

        opts.devices = cstr(devices)
        opts.plugin_path = cstr(plugin_path)
        opts.plugins_disable = cstr(plugins_disable)
        opts.log_level = lib.GK_LOG_WARNING if log_level is None else log_level
        out = ffi.new("gk_runtime**")
        check(lib.gk_runtime_create(opts, out))
        self._ptr = ffi.gc(out[0], lib.gk_runtime_destroy)
        self._devices = None
        self._dl_devices = {}  # (DLPack device type, id) -> Device, for from_dlpack

    @property
    def ptr(self):
        return self._ptr

    def devices(self) -> list:
        if self._devices is None:
            n = ffi.new("int32_t*")
            check(lib.gk_device_count(self._ptr, n))
            self._devices = [Device(self, i) for i in range(n[0])]
        return list(self._devices)

    def device(self, spec=None) -> "Device":
        """A Device from None (the default device), a Device, an id, "cpu", "cuda" or
        "cuda:N" (N = CUDA ordinal)."""
        devs = self.devices()
        if spec is None:
            return devs[lib.gk_device_default(self._ptr)]
        if isinstance(spec, Device):
            if spec.runtime is self:
                return spec
            spec = str(spec)
        if isinstance(spec, int):
            if not 0 <= spec < len(devs):
                raise ValueError(f"device id {spec} is outside 0..{len(devs) - 1}")
            return devs[spec]
        if isinstance(spec, str):
            kind, _, ordinal = spec.partition(":")
            for d in devs:
                if d.kind == kind and (not ordinal or d.ordinal == int(ordinal)):
                    return d
            raise ValueError(f"no device {spec!r} in this runtime (have: "
                             f"{', '.join(str(d) for d in devs)})")
        raise TypeError(f"cannot interpret {spec!r} as a device")

    def default_device(self) -> "Device":
        return self.device(None)

    def plugins(self) -> list:
        out = []
        info = ffi.new("gk_plugin_info*")
        for i in range(lib.gk_plugin_count(self._ptr)):
            info.struct_size = ffi.sizeof("gk_plugin_info")
            check(lib.gk_plugin_get(self._ptr, i, info))
            # Manifest fields are bytes from a file: any that are not UTF-8 are replaced.
            s = lambda p: (ffi.string(p).decode("utf-8", "replace")  # noqa: E731
                           if p != ffi.NULL else None)
            out.append({"name": s(info.name), "version": s(info.version),
                        "family": s(info.family), "manifest_path": s(info.manifest_path),
                        "library_path": s(info.library_path), "loaded": bool(info.loaded),
                        "reason": s(info.reason), "priority": info.priority,
                        "device_kind": KIND_NAMES.get(info.device_kind, info.device_kind),
                        "sm_min": info.sm_min, "sm_max": info.sm_max})
        return out

    def ops(self) -> list:
        return [ffi.string(lib.gk_op_name(self._ptr, i)).decode()
                for i in range(lib.gk_op_count(self._ptr))]

    def info(self) -> dict:
        out = ffi.new("char**")
        check(lib.gk_runtime_info_json(self._ptr, out))
        return json.loads(take_string(out[0]))

    def explain(self, op: str, *inputs, outputs=None, device=None, **attrs) -> dict:
        """How op `op` would be dispatched for `inputs` (GPUArrays or (shape, dtype)
        pairs): {"op", "device", "chosen", "candidates": [...]}. Nothing is run."""
        # Here, not at the top: the array and op-call modules import this one.
        from ._array import GPUArray
        from ._call import _attrs, _output_descs

        descs, dev = [], None
        for x in inputs:
            if isinstance(x, GPUArray):
                descs.append(x._desc())
                dev = dev or x.device
            else:
                shape, dtype = x
                descs.append(_desc_for(_gk_dtype(dtype), tuple(shape)))
        dev = self.device(device) if device is not None else (dev or self.device(None))
        if outputs is None and inputs and all(isinstance(x, GPUArray) for x in inputs):
            try:
                outputs = _output_descs(self, op, list(inputs), attrs)
            except Exception:  # noqa: BLE001 — explain still lists why candidates decline
                outputs = []
        out_descs = []
        for o in outputs or []:
            if isinstance(o, GPUArray):
                out_descs.append(o._desc())
            elif isinstance(o, tuple) and len(o) == 2 and not isinstance(o[0], int):
                out_descs.append(_desc_for(_gk_dtype(o[1]), tuple(o[0])))
            else:
                out_descs.append(o)
        in_arr = ffi.new("gk_tensor_desc[]", max(len(descs), 1))
        for i, d in enumerate(descs):
            in_arr[i] = d[0]
        out_arr = ffi.new("gk_tensor_desc[]", max(len(out_descs), 1))
        for i, d in enumerate(out_descs):
            out_arr[i] = d[0]
        attr_arr, n_attrs, _keep = _attrs(attrs)
        res = ffi.new("char**")
        check(lib.gk_explain(self._ptr, op.encode(), dev.id, in_arr, len(descs), out_arr,
                             len(out_descs), attr_arr, n_attrs, res))
        return json.loads(take_string(res[0]))


class Device:
    """One device of a runtime: the cpu device (id 0) or a CUDA device."""

    def __init__(self, rt: Runtime, device_id: int):
        self.runtime = rt
        self.id = device_id
        p = ffi.new("gk_device_props*")
        p.struct_size = ffi.sizeof("gk_device_props")
        check(lib.gk_device_get_props(rt.ptr, device_id, p))
        self.kind = KIND_NAMES.get(p.kind, str(p.kind))
        self.ordinal = p.ordinal
        self.name = ffi.string(p.name).decode(errors="replace")
        self.sm_version = p.sm_version

    @property
    def props(self) -> dict:
        """Properties read now (free_memory changes)."""
        p = ffi.new("gk_device_props*")
        p.struct_size = ffi.sizeof("gk_device_props")
        check(lib.gk_device_get_props(self.runtime.ptr, self.id, p))
        return {"id": self.id, "kind": self.kind, "ordinal": p.ordinal,
                "name": ffi.string(p.name).decode(errors="replace"),
                "sm_version": p.sm_version, "sm_count": p.sm_count,
                "total_memory": p.total_memory, "free_memory": p.free_memory,
                "driver_version": p.driver_version, "nvrtc_version": p.nvrtc_version,
                "plugins_eligible": bool(p.plugins_eligible),
                "note": ffi.string(p.note).decode(errors="replace")}

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def set_memory_budget(self, budget) -> None:
        """Limits the bytes in use on this device (gk_memory_set_budget): an int or a size
        string ("64MiB", see parse_memory); 0 removes the limit. Allocations past it spill
        evictable buffers, then fail with ResourceExhausted. Tasks are admitted against the
        budget when one is set, else against the device's total memory."""
        check(lib.gk_memory_set_budget(self.runtime.ptr, self.id,
                                       parse_memory(budget, "budget")))

    def memory_stats(self) -> dict:
        """This device's pool statistics (gk_memory_stats_get), read now: every field of
        gk_memory_stats (bytes_in_use, bytes_reserved, budget, spill_count, …)."""
        st = ffi.new("gk_memory_stats*")
        st.struct_size = ffi.sizeof("gk_memory_stats")
        check(lib.gk_memory_stats_get(self.runtime.ptr, self.id, st))
        return {name: getattr(st, name) for name, _ in ffi.typeof("gk_memory_stats").fields
                if name != "struct_size"}

    def __str__(self):
        return f"cuda:{self.ordinal}" if self.is_cuda else "cpu"

    def __repr__(self):
        return f"Device({str(self)!r}, id={self.id}, name={self.name!r})"

    def __eq__(self, other):
        if isinstance(other, Device):
            return self.runtime is other.runtime and self.id == other.id
        if isinstance(other, str):
            return str(self) == other or (other == "cuda" and self.is_cuda and self.ordinal == 0)
        return NotImplemented

    def __hash__(self):
        return hash((id(self.runtime), self.id))


class Stream:
    """A gk_stream: created on a device, or wrapping a native CUDA stream (``Stream.wrap``,
    not owned). ``native`` is the CUstream as an int (0 = legacy default / cpu)."""

    def __init__(self, device=None, priority: int = 0, *, runtime: Runtime | None = None,
                 _ptr=None):
        self.runtime = runtime or _default_runtime()
        self.device = self.runtime.device(device)
        if _ptr is None:
            out = ffi.new("gk_stream**")
            check(lib.gk_stream_create(self.runtime.ptr, self.device.id, priority, out))
            _ptr = out[0]
        self._ptr = ffi.gc(_ptr, lib.gk_stream_destroy)

    @classmethod
    def wrap(cls, native: int, device=None, *, runtime: Runtime | None = None) -> "Stream":
        rt = runtime or _default_runtime()
        dev = rt.device(device if device is not None else "cuda")
        out = ffi.new("gk_stream**")
        check(lib.gk_stream_wrap(rt.ptr, dev.id, ffi.cast("void*", int(native)), out))
        return cls(dev, runtime=rt, _ptr=out[0])

    @property
    def ptr(self):
        return self._ptr

    @property
    def native(self) -> int:
        out = ffi.new("void**")
        check(lib.gk_stream_native(self._ptr, out))
        return int(ffi.cast("uintptr_t", out[0]))

    def synchronize(self) -> None:
        check(lib.gk_stream_synchronize(self._ptr))

    def wait_event(self, event: "Event") -> None:
        check(lib.gk_stream_wait_event(self._ptr, event.ptr))

    def record_event(self) -> "Event":
        ev = Event(self.device, runtime=self.runtime)
        ev.record(self)
        return ev

    def __repr__(self):
        return f"Stream(device={self.device}, native=0x{self.native:x})"


class Event:
    """A gk_event on one device."""

    def __init__(self, device=None, *, runtime: Runtime | None = None):
        self.runtime = runtime or _default_runtime()
        self.device = self.runtime.device(device)
        out = ffi.new("gk_event**")
        check(lib.gk_event_create(self.runtime.ptr, self.device.id, out))
        self._ptr = ffi.gc(out[0], lib.gk_event_destroy)

    @property
    def ptr(self):
        return self._ptr

    def record(self, stream: Stream | None = None) -> "Event":
        check(lib.gk_event_record(self._ptr, stream.ptr if stream is not None else ffi.NULL))
        return self

    def synchronize(self) -> None:
        check(lib.gk_event_synchronize(self._ptr))

    def query(self) -> bool:
        status = lib.gk_event_query(self._ptr)
        if status == lib.GK_UNAVAILABLE:
            return False
        check(status)
        return True

    def elapsed_ms(self, end: "Event") -> float:
        out = ffi.new("float*")
        check(lib.gk_event_elapsed_ms(self._ptr, end.ptr, out))
        return float(out[0])


_default = None
_default_lock = threading.Lock()


def _default_runtime() -> Runtime:
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Runtime()
    return _default


def runtime() -> Runtime:
    """The default runtime, created on first use (devices and plugins from the
    environment: GPUKIT_DEVICE, GPUKIT_PLUGIN_PATH, …)."""
    return _default_runtime()


def devices() -> list:
    return runtime().devices()


def default_device() -> Device:
    return runtime().default_device()


def plugins() -> list:
    return runtime().plugins()


def ops() -> list:
    return runtime().ops()


def explain(op: str, *inputs, **kwargs) -> dict:
    return runtime().explain(op, *inputs, **kwargs)


def info() -> dict:
    return runtime().info()


def device_of(spec) -> Device:
    """A Device as given (of whichever runtime made it), else `spec` (None, an id, "cpu",
    "cuda", "cuda:N") looked up in the default runtime."""
    if isinstance(spec, Device):
        return spec
    return runtime().device(spec)


def current_stream():
    """The Stream ops run on when none is given: inside ``with gpukit.task(...)`` the task's
    stream (for ops whose inputs are on the task's device), else None, which means the
    device's default stream."""
    return _current_stream.get() if _open_task_streams[0] else None


def set_memory_budget(device, budget) -> None:
    """Limits the bytes in use on `device` (a Device, id or name; see Device.
    set_memory_budget). `budget` is bytes or a size string ("64MiB"); 0 removes it."""
    device_of(device).set_memory_budget(budget)


def memory_stats(device=None) -> dict:
    """The pool statistics of `device` (default: the default device), see
    Device.memory_stats."""
    return device_of(device).memory_stats()
