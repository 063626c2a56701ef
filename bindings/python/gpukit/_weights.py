"""Model weights (SafeTensors, GGUF) as a read-only mapping of name -> GPUArray, over the
C ABI's gk_weights_* calls (gpukit.h, "Weights, ABI 1.4"; docs/weights.md).

Opening reads and checks every header and maps the files; a tensor is fetched by
gk_weights_get on first access (zero copy from the mapping on the cpu device as stored,
otherwise converted and uploaded once) and cached by the library per device and dtype.
Every array handed out is read-only.
"""
from __future__ import annotations

import collections.abc
import json
import os
import sys
import threading
import time

from ._array import GPUArray
from ._creation import _resolve
from ._dtypes import _FLOATING, _GK_NAMES, _PACKED, _dtype_name, _gk_dtype
from ._lib import check, ffi, lib, take_string
from ._runtime import current_stream

__all__ = ["Weights", "load_weights"]

_CONVERTIBLE = _FLOATING | set(_PACKED)  # stored dtypes that dtype= converts
# The dtypes dtype= converts to (gk_dtype -> name): the floating ones.
_TARGETS = {gk: _GK_NAMES[gk] for gk in sorted(_FLOATING)}
_PROGRESS_FN = "void(void*, uint64_t, uint64_t)"


def _target_dtype(dtype) -> int:
    """dtype= of load_weights as a gk_dtype: 0 for None (as stored), else f32, f64, f16 or
    bf16 given by name ("bf16", "float16") or as a NumPy dtype."""
    if dtype is None:
        return 0
    try:
        gk = _gk_dtype(dtype)
    except TypeError:
        gk = None
    if gk not in _TARGETS:
        shown = _dtype_name(gk) if gk is not None else repr(dtype)
        raise ValueError(f"dtype={shown} is not a conversion target of the weights; give "
                         "\"f32\", \"f16\", \"bf16\" or \"f64\" (or the NumPy dtype), or "
                         "None to keep each tensor as stored")
    return gk


class _ProgressBar:
    """One line on a terminal, redrawn at most ten times a second: label, bar, percent,
    bytes done of total."""

    def __init__(self, label: str, stream):
        self._label = label if len(label) <= 32 else "…" + label[-31:]
        self._stream = stream
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = done / total if total else 1.0
        filled = int(frac * 24)
        mib = 1024.0 * 1024.0
        line = (f"\r{self._label}  [{'#' * filled}{'.' * (24 - filled)}] {frac * 100:5.1f}%  "
                f"{done / mib:.1f}/{total / mib:.1f} MiB")
        self._stream.write(line)
        self._stream.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()


class Weights(collections.abc.Mapping):
    """A weight set (gk_weights): a read-only Mapping of tensor name -> GPUArray, in file
    order (shard by shard). Made by gpukit.load_weights.

    ``w[name]`` fetches the tensor on the weight set's device, as its dtype (see
    load_weights), on first access; the library caches it, so a second access returns the
    same memory. Arrays are read-only and stay valid after close(). ``info(name)``,
    ``metadata``, ``format``, ``load()``, ``release()``, ``close()``; a context manager.
    """

    def __init__(self, path, device=None, dtype=None, *, runtime=None):
        self._path = os.fspath(path)
        if isinstance(self._path, bytes):
            self._path = os.fsdecode(self._path)
        dev = _resolve(device, runtime)
        self._rt = dev.runtime
        self._device = dev
        self._dtype = _target_dtype(dtype)
        # The progress callback lives as long as the weights: the library may call it from
        # gk_weights_load at any time until close. It reads the current sink from a list,
        # so no reference cycle goes through the cffi callback.
        self._sink = [None]
        sink = self._sink

        def on_progress(_user, done, total):
            fn = sink[0]
            if fn is not None:
                fn(int(done), int(total))

        self._callback = ffi.callback(_PROGRESS_FN, on_progress, onerror=_progress_error)
        opts = ffi.new("gk_weights_options*")
        opts.struct_size = ffi.sizeof("gk_weights_options")
        opts.owner = ffi.NULL
        opts.progress = self._callback
        opts.progress_user_data = ffi.NULL
        out = ffi.new("gk_weights**")
        check(lib.gk_weights_open(self._rt.ptr, os.fsencode(self._path), opts, out))
        self._ptr = ffi.gc(out[0], lib.gk_weights_close)
        self._lock = threading.Condition()
        self._in_flight = 0
        self._closed = False
        self._metadata = None
        self._format = ffi.string(lib.gk_weights_format(self._ptr)).decode()
        # Names and descriptions are copied now: the library's strings live only as long
        # as the weights, and these stay readable after close().
        self._infos = {}
        info = ffi.new("gk_weight_info*")
        for i in range(lib.gk_weights_count(self._ptr)):
            info.struct_size = ffi.sizeof("gk_weight_info")
            check(lib.gk_weights_info(self._ptr, i, info))
            name = ffi.string(info.name).decode("utf-8", "surrogateescape")
            self._infos[name] = {
                "name": name,
                "dtype": ffi.string(lib.gk_dtype_name(info.dtype)).decode(),
                "shape": tuple(info.shape[d] for d in range(info.ndim)),
                "bytes": int(info.bytes),
                "file": ffi.string(info.file).decode("utf-8", "surrogateescape"),
                "offset": int(info.file_offset),
                "_gk_dtype": int(info.dtype),
            }
        try:
            self._check_target(self._dtype)
        except ValueError:
            self.close()
            raise

    # -- the C handle, guarded against close() -----------------------------------------------
    def _enter(self):
        with self._lock:
            if self._closed:
                raise ValueError(f"the weights of {self._path!r} are closed")
            self._in_flight += 1
        return self._ptr

    def _exit(self):
        with self._lock:
            self._in_flight -= 1
            if not self._in_flight:
                self._lock.notify_all()

    def close(self) -> None:
        """Closes the weight set (gk_weights_close) once calls in flight on other threads
        have returned. Arrays already handed out stay valid; fetching more, load(),
        release() and metadata (if not read before) raise ValueError after. Listing
        (len, iteration, info, format) keeps working."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._in_flight:
                self._lock.wait()
        ffi.release(self._ptr)  # runs gk_weights_close now
        self._callback = None

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- Mapping ---------------------------------------------------------------------------
    def __getitem__(self, name) -> GPUArray:
        return self.tensor(name)

    def __iter__(self):
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def __contains__(self, name) -> bool:
        return name in self._infos

    def keys(self):
        return self._infos.keys()

    def __repr__(self):
        state = "closed" if self._closed else f"on {self._device}"
        dtype = f", as {_TARGETS[self._dtype]}" if self._dtype else ""
        return (f"<gpukit.Weights {self._path!r}: {self._format}, {len(self)} tensors, "
                f"{state}{dtype}>")

    # -- description -------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def format(self) -> str:
        """"safetensors" or "gguf"."""
        return self._format

    @property
    def device(self):
        """The Device tensors are fetched to."""
        return self._device

    @property
    def dtype(self) -> str | None:
        """The dtype floating-point and block-quantized tensors are converted to ("f32",
        "f16", "bf16", "f64"), or None for each as stored."""
        return _TARGETS.get(self._dtype)

    @property
    def nbytes(self) -> int:
        """Stored bytes of every tensor."""
        return sum(i["bytes"] for i in self._infos.values())

    def info(self, name: str) -> dict:
        """How tensor `name` is stored: {"name", "dtype" (as stored: "bf16", "q4_k", …),
        "shape" (row-major, innermost last; GGUF's order reversed), "bytes", "file",
        "offset"}. KeyError for an unknown name."""
        try:
            i = self._infos[name]
        except (KeyError, TypeError):
            raise KeyError(self._not_found(name)) from None
        return {k: v for k, v in i.items() if not k.startswith("_")}

    @property
    def metadata(self) -> dict:
        """The weight set's metadata (gk_weights_metadata_json), parsed once: SafeTensors'
        "__metadata__" strings, or every GGUF key with its value (numbers, strings,
        booleans, lists; the tokenizer's vocabulary included)."""
        if self._metadata is None:
            ptr = self._enter()
            try:
                out = ffi.new("char**")
                check(lib.gk_weights_metadata_json(ptr, out))
                text = take_string(out[0])
            finally:
                self._exit()
            self._metadata = json.loads(text)
        return self._metadata

    def _not_found(self, name) -> str:
        """The library's NOT_FOUND message for `name` (it names the closest tensor)."""
        if not isinstance(name, str):
            return f"weight names are str, got {type(name).__name__}"
        if self._closed:
            return f"no tensor {name!r} in {self._path!r}"
        ptr = self._enter()
        try:
            index = ffi.new("int64_t*")
            status = lib.gk_weights_find(ptr, name.encode("utf-8", "surrogateescape"), index)
            if status == 0:  # listed by the library but not at open: cannot happen
                return f"tensor {name!r} of {self._path!r} was not listed when it was opened"
            from ._lib import last_error
            return last_error() or f"no tensor {name!r} in {self._path!r}"
        finally:
            self._exit()

    # -- tensors -----------------------------------------------------------------------------
    def _dtype_for(self, stored: int, dtype: int) -> int:
        """The dtype to ask gk_weights_get for: 0 (as stored) for integer and bool tensors
        and where the target is the stored dtype, else the target."""
        if not dtype or stored not in _CONVERTIBLE or stored == dtype:
            return 0
        return dtype

    def tensor(self, name: str, device=None, dtype=None) -> GPUArray:
        """Tensor `name`, read-only: w[name], or on another `device` / as another `dtype`
        (f32 f16 bf16 f64; None: the weight set's) than the weight set's. Each (device,
        dtype) copy is made once and cached by the library."""
        try:
            info = self._infos[name]
        except (KeyError, TypeError):
            raise KeyError(self._not_found(name)) from None
        dev = self._device if device is None else _resolve(device, self._rt)
        if dev.runtime is not self._rt:
            raise ValueError(f"device {dev} belongs to another runtime than the weights")
        target = self._dtype if dtype is None else _target_dtype(dtype)
        gk = self._dtype_for(info["_gk_dtype"], target)
        stream = self._stream_for(dev)
        out = ffi.new("gk_tensor**")
        ptr = self._enter()
        try:
            check(lib.gk_weights_get(ptr, name.encode("utf-8", "surrogateescape"), dev.id, gk,
                                     stream.ptr if stream is not None else ffi.NULL, out))
        finally:
            self._exit()
        return GPUArray._wrap(self._rt, out[0], stream, dev)

    @staticmethod
    def _stream_for(dev):
        """Inside `with gpukit.task(...)` on `dev`: the task's stream, so device copies are
        charged to the task; else None (the device's default stream)."""
        s = current_stream()
        return s if s is not None and s.device == dev else None

    def load(self, device=None, dtype=None, progress=None) -> "Weights":
        """Makes every tensor available on `device` (default: the weight set's) as `dtype`
        (default: the weight set's) now (gk_weights_load: files read in parallel, chunks
        in flight), so later accesses cost nothing. `progress`: None shows a bar on
        stderr when it is a terminal; True always, False never; or a callable(done_bytes,
        total_bytes). Returns the weights."""
        dev = self._device if device is None else _resolve(device, self._rt)
        target = self._dtype if dtype is None else _target_dtype(dtype)
        if progress is None:
            progress = sys.stderr.isatty()
        bar = None
        if progress is True:
            bar = _ProgressBar(os.path.basename(self._path.rstrip(os.sep)) or self._path,
                               sys.stderr)
            fn = bar
        else:
            fn = progress if callable(progress) else None
        self._check_target(target)
        stream = self._stream_for(dev)
        ptr = self._enter()
        try:
            # The library converts what converts to `target` and keeps integer and bool
            # tensors as stored, as tensor() does.
            self._sink[0] = fn
            try:
                check(lib.gk_weights_load(ptr, dev.id, target,
                                          stream.ptr if stream is not None else ffi.NULL))
            finally:
                self._sink[0] = None
        finally:
            self._exit()
            if bar is not None:
                bar.finish()
        return self

    def _check_target(self, target: int) -> None:
        """Block-quantized tensors dequantize to f32, f16 and bf16 only: f64 for a weight
        set that holds some is refused up front, naming one."""
        if target == 2:
            for info in self._infos.values():
                if info["_gk_dtype"] in _PACKED:
                    raise ValueError(
                        f"dtype=f64: tensor {info['name']!r} of {self._path!r} is "
                        f"{info['dtype']}, and block-quantized tensors dequantize to f32, f16 "
                        "or bf16 only")

    def release(self, device=None) -> None:
        """Drops the library's cached tensors of `device` (None: every device)
        (gk_weights_release). Arrays handed out stay valid; their memory goes back when the
        last of them goes."""
        dev_id = -1 if device is None else _resolve(device, self._rt).id
        ptr = self._enter()
        try:
            check(lib.gk_weights_release(ptr, dev_id))
        finally:
            self._exit()


def _progress_error(exc_type, exc, tb):
    """A progress callable that raised: shown once on stderr; loading goes on."""
    print(f"gpukit.load_weights: the progress callback raised {exc_type.__name__}: {exc}",
          file=sys.stderr)
    return None


def load_weights(path, device=None, dtype=None, *, preload: bool = False, progress=None,
                 runtime=None) -> Weights:
    """Opens a weight set: a ``.safetensors`` file, a sharded checkpoint's
    ``model.safetensors.index.json``, a folder holding either, or a ``.gguf`` file.
    Returns a read-only Mapping of name -> GPUArray (see Weights).

    `device`: where tensors go, as elsewhere in gpukit (None: the runtime's default device;
    a Device, an id, "cpu", "cuda", "cuda:N"). On the cpu device, as stored, a tensor is
    the file's bytes, mapped without a copy.

    `dtype`: None keeps each tensor as stored (block-quantized ones stay packed, dtype
    "q4_k" etc.); "f32", "f16", "bf16", "f64" or the NumPy dtype converts floating-point
    tensors and dequantizes block-quantized ones; integer and bool tensors stay as stored.

    `preload=True` calls load() before returning (with `progress` as there)."""
    w = Weights(path, device, dtype, runtime=runtime)
    if preload:
        try:
            w.load(progress=progress)
        except BaseException:
            w.close()
            raise
    return w
