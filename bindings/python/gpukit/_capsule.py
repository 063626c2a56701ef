"""PyCapsule handling for DLPack (ctypes over the CPython API; cffi has no capsules)."""
from __future__ import annotations

import ctypes

from ._lib import ffi

VERSIONED = b"dltensor_versioned"
USED_VERSIONED = b"used_dltensor_versioned"
LEGACY = b"dltensor"
USED_LEGACY = b"used_dltensor"

# Names must outlive the capsules that carry them: module-level buffers.
_NAMES = {n: ctypes.create_string_buffer(n) for n in (VERSIONED, USED_VERSIONED, LEGACY,
                                                      USED_LEGACY)}

_api = ctypes.pythonapi
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_SetName", _api))
_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, _Destructor)(
    ("PyCapsule_New", _api))
# Raw variants for the destructor, which must not take a reference to a dying capsule.
_IsValidRaw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))


@_Destructor
def _destructor(capsule):
    # Only an unconsumed capsule still owns its managed tensor.
    if _IsValidRaw(capsule, VERSIONED):
        m = ffi.cast("DLManagedTensorVersioned*", _GetPointerRaw(capsule, VERSIONED))
    elif _IsValidRaw(capsule, LEGACY):
        m = ffi.cast("DLManagedTensor*", _GetPointerRaw(capsule, LEGACY))
    else:
        return
    if m.deleter != ffi.NULL:
        m.deleter(m)


def new(managed, versioned: bool):
    """A capsule owning `managed` (cffi pointer) until a consumer renames it."""
    name = _NAMES[VERSIONED if versioned else LEGACY]
    addr = int(ffi.cast("uintptr_t", managed))
    return _New(addr, ctypes.addressof(name), _destructor)


def name_of(capsule) -> bytes | None:
    try:
        return _GetName(capsule)
    except Exception:  # noqa: BLE001 — not a capsule
        return None


def is_valid(capsule, name: bytes) -> bool:
    return bool(_IsValid(capsule, name))


def pointer(capsule, name: bytes) -> int:
    return _GetPointer(capsule, name)


def mark_used(capsule, versioned: bool) -> None:
    new_name = _NAMES[USED_VERSIONED if versioned else USED_LEGACY]
    if _SetName(capsule, ctypes.addressof(new_name)) != 0:
        raise BufferError("could not rename the DLPack capsule")
