"""GPUArray: a NumPy-like array over a gk_tensor, one reference to the tensor per array.

Views (slicing, reshape, .T) share memory: a view is gk_tensor_from_external over the base
tensor's memory whose release callback is gk_tensor_release of a reference it holds to the
base. The methods that run ops (arithmetic and comparison operators, reductions, astype,
copy) are in _operators.py, which installs them on this class: an op call returns
GPUArrays, so the op call (_call.py) comes after this module and they cannot be here
without an import cycle.
"""
from __future__ import annotations

import builtins as _b
import math
import numbers

import numpy as np

from . import _capsule
from ._dlpack import DLDeviceType, _device_from_dl, _sync_for_consumer
from ._dtypes import (_BF16, _GK_TO_NP, _ITEMSIZE, _PACKED, _SZ_GK_TENSOR_DESC,
                      _T_GK_TENSOR_DESC, _contiguous_strides, _desc_for, _dtype_name,
                      _np_dtype, _packed_bytes, _packed_error)
from ._lib import check, ffi, lib
from ._runtime import Device, Runtime

__all__ = ["GPUArray"]

# NumPy's AxisError (a ValueError and an IndexError): numpy.exceptions from NumPy 1.25 on.
_AxisError = getattr(getattr(np, "exceptions", np), "AxisError")

_RELEASE_TENSOR = ffi.cast("gk_release_fn", lib.gk_tensor_release)
_T_DLMANAGEDTENSOR = ffi.typeof("DLManagedTensor**")
_T_DLMANAGEDTENSORVERSIONED = ffi.typeof("DLManagedTensorVersioned**")
_T_GK_TENSOR = ffi.typeof("gk_tensor**")
# cffi's backend entry point: ffi.new is a Python wrapper around it (one Python call on the
# hot path below).
_newp = ffi._backend.newp
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

    # -- copies, devices ------------------------------------------------------------
    # (_contiguous, copy and astype run ops: _operators.py)
    def _host_strided(self) -> np.ndarray:
        if not self._device.is_cuda:
            return np.ascontiguousarray(self.to_numpy())
        return self._host_via_extent(_np_dtype(self._gk_dtype))

    def contiguous(self) -> "GPUArray":
        return self if self.is_contiguous else self._contiguous()

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

    # -- operators: _operators.py --------------------------------------------------------
    # == returns an array, as in NumPy, so arrays are unhashable (NumPy's rule too).
    __hash__ = None

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


def _wait_for(x: GPUArray) -> None:
    """Blocks until the stream `x` was produced on (if not the default stream) has finished
    its work, so a copy on the default stream reads the result: a task's or a user's
    stream is non-blocking, not ordered with the default stream."""
    if x._stream is not None and x._device.is_cuda:
        x._stream.synchronize()


def _normalize_axis(axis, ndim: int) -> int:
    """`axis` in [-ndim, ndim) as a non-negative index, else NumPy's AxisError."""
    if not isinstance(axis, (numbers.Integral, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"an axis must be an integer, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise _AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return int(axis) % ndim

