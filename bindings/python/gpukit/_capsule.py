"""PyCapsule handling for DLPack (ctypes over the CPython API; cffi has no capsules)."""
from __future__ import annotations

import ctypes

from ._lib import ffi

VERSIONED = b"dltensor_versioned"
USED_VERSIONED = b"used_dltensor_versioned"
LEGACY = b"dltensor"
USED_LEGACY = b"used_dltensor"

# Names must outlive the capsules that carry them: module-level buffers, and their
# addresses (what PyCapsule_New and PyCapsule_SetName keep).
_NAMES = {n: ctypes.create_string_buffer(n) for n in (VERSIONED, USED_VERSIONED, LEGACY,
                                                      USED_LEGACY)}
_ADDRESSES = {n: ctypes.addressof(buf) for n, buf in _NAMES.items()}
_VERSIONED_ADDRESS = _ADDRESSES[VERSIONED]
_LEGACY_ADDRESS = _ADDRESSES[LEGACY]

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
_GetNameRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetName", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_T_UINTPTR = ffi.typeof("uintptr_t")
_T_VERSIONED_PTR = ffi.typeof("DLManagedTensorVersioned*")
_T_LEGACY_PTR = ffi.typeof("DLManagedTensor*")


@_Destructor
def _destructor(capsule):
    # Only an unconsumed capsule still owns its managed tensor. Our capsules are made with
    # our name buffers and a consumer renames them with its own, so comparing the name's
    # address tells the two apart with one call (this runs once per exported capsule).
    name = _GetNameRaw(capsule)
    if name == _VERSIONED_ADDRESS:
        m = ffi.cast(_T_VERSIONED_PTR, _GetPointerRaw(capsule, VERSIONED))
    elif name == _LEGACY_ADDRESS:
        m = ffi.cast(_T_LEGACY_PTR, _GetPointerRaw(capsule, LEGACY))
    else:
        return
    if m.deleter != ffi.NULL:
        m.deleter(m)


def new(managed, versioned: bool):
    """A capsule owning `managed` (cffi pointer) until a consumer renames it."""
    name = _VERSIONED_ADDRESS if versioned else _LEGACY_ADDRESS
    return _New(int(ffi.cast(_T_UINTPTR, managed)), name, _destructor)


def name_of(capsule) -> bytes | None:
    try:
        return _GetName(capsule)
    except Exception:  # noqa: BLE001 — not a capsule
        return None


def is_valid(capsule, name: bytes) -> bool:
    return bool(_IsValid(capsule, name))


def pointer(capsule, name: bytes) -> int:
    return _GetPointer(capsule, name)


def versioned_pointer(capsule) -> int | None:
    """The managed tensor of an unconsumed "dltensor_versioned" capsule, else None. One
    C call on the usual path (IsValid + GetPointer would be two)."""
    try:
        return _GetPointer(capsule, VERSIONED)
    except ValueError:  # another name, or not a capsule
        return None


def mark_used(capsule, versioned: bool) -> None:
    new_name = _ADDRESSES[USED_VERSIONED if versioned else USED_LEGACY]
    if _SetName(capsule, new_name) != 0:
        raise BufferError("could not rename the DLPack capsule")
