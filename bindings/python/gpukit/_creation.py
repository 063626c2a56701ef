"""Making arrays: from host data (asarray, full, zeros, ones, arange), empty ones, and
imports from any DLPack producer (from_dlpack, from_numpy; zero copy where they can be).
"""
from __future__ import annotations

import numbers

import numpy as np

from . import _capsule
from ._array import _T_GK_TENSOR, GPUArray, _wait_for
from ._dlpack import _device_from_dl
from ._dtypes import _check_shape, _desc_for, _gk_dtype, _np_dtype
from ._lib import check, ffi, lib
from ._runtime import Device, Runtime, runtime as _runtime

__all__ = ["asarray", "from_numpy", "from_dlpack", "empty", "zeros", "ones", "full", "arange"]

_T_DLMANAGEDTENSORVERSIONED_PTR = ffi.typeof("DLManagedTensorVersioned*")
# cffi's backend entry points: ffi.new / ffi.cast are Python wrappers around them (one
# Python call each on the DLPack import's hot path).
_newp = ffi._backend.newp
_cast = ffi._backend.cast
_new_object = object.__new__
_USED_VERSIONED_ADDRESS = _capsule._ADDRESSES[_capsule.USED_VERSIONED]
_VERSIONED = _capsule.VERSIONED
_GetPointer = _capsule._GetPointer
_SetName = _capsule._SetName
_FAILED_PRECONDITION = lib.GK_FAILED_PRECONDITION
_MAX_VERSION = (1, 1)  # the DLPack version we ask producers for


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


def _copy_tensor(x: GPUArray) -> GPUArray:
    dst = GPUArray._create(x._rt, x._device, _desc_for(x._gk_dtype, x._shape))
    _wait_for(x)
    check(lib.gk_copy(dst._t, x._t, ffi.NULL))
    return dst


def _resolve(device, rt: Runtime | None = None) -> Device:
    if isinstance(device, Device):
        return device
    return (rt or _runtime()).device(device)


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
    np_dtype = None if dtype is None else _np_dtype(_gk_dtype(dtype))
    host = np.arange(start, stop, step, dtype=np_dtype)
    return _from_host(host, _resolve(device))
