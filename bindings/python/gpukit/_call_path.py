"""Chooses gpukit.call's implementation: the compiled one (gpukit._compiled_call, a CPython
extension built from _compiled_call.c) when it is there and passes its self-check, else the
Python one (_array.call). The compiled one hands every case it does not serve to the Python
one, so both give the same results and the same errors (docs/python.md).

Where the extension is looked for, first match wins:
  1. <directory of LIBRARY_PATH>/gpukit/python/_compiled_call.abi3.so (a CMake build tree,
     beside the libgpukit it was built with),
  2. _compiled_call.abi3.so inside this package (a pip-installed wheel).
GPUKIT_PURE_PYTHON=1 (any value but "" and "0") keeps the Python implementation.

ACTIVE is "compiled" or "python"; REASON says why the Python one was kept ("" when not).
"""
from __future__ import annotations

import logging
import os
import sys

from ._lib import LIBRARY_PATH, check, ffi, lib
from ._runtime import Stream, _current_stream, _open_task_streams

FILE_NAME = "_compiled_call.abi3.so"
MODULE_NAME = "gpukit._compiled_call"
_HERE = os.path.dirname(os.path.abspath(__file__))

ACTIVE = "python"
REASON = "not loaded yet"
module = None  # gpukit._compiled_call once loaded and initialised


def candidates() -> list:
    return [os.path.join(os.path.dirname(LIBRARY_PATH), "gpukit", "python", FILE_NAME),
            os.path.join(_HERE, FILE_NAME)]


def _load_extension(path: str):
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import module_from_spec, spec_from_file_location

    # Loading a single-phase extension module enters it in sys.modules; what was there
    # stays (choose() enters the module once it is initialised).
    previous = sys.modules.get(MODULE_NAME)
    try:
        loader = ExtensionFileLoader(MODULE_NAME, path)
        spec = spec_from_file_location(MODULE_NAME, path, loader=loader)
        mod = module_from_spec(spec)
        loader.exec_module(mod)
    finally:
        if previous is None:
            sys.modules.pop(MODULE_NAME, None)
        else:
            sys.modules[MODULE_NAME] = previous
    return mod


def _no_release(_ptr) -> None:
    """The destructor of the ffi.gc probe: it owns nothing."""


def cdata_probes() -> list:
    """(cdata, ctype, address) for each kind of cdata object the binding hands to call: a
    cast, an item read from a gk_tensor*[] (how every array gets its tensor) and an
    ffi.gc object (Runtime._ptr, Stream._ptr)."""
    tensor_t, stream_t, runtime_t = (ffi.typeof("gk_tensor*"), ffi.typeof("gk_stream*"),
                                     ffi.typeof("gk_runtime*"))
    items = ffi.new("gk_tensor*[]", 1)
    items[0] = ffi.cast(tensor_t, 0x12345670)
    return [(ffi.cast(tensor_t, 0x12345678), tensor_t, 0x12345678),
            (items[0], tensor_t, 0x12345670),
            (ffi.gc(ffi.cast(stream_t, 0x2345678), _no_release), stream_t, 0x2345678),
            (ffi.gc(ffi.cast(runtime_t, 0x3456780), _no_release), runtime_t, 0x3456780)]


def init(mod, array_type, python_call) -> None:
    """Runs the extension's self-checks and binds it to this package (raises if a check
    fails; then it serves nothing)."""
    slot = ffi.new("gk_tensor*[]", 1)  # outputs' cdata are read out of this item
    probe = object.__new__(array_type)
    sentinels = (object(), object(), object(), object())
    probe._rt, probe._t, probe._device, probe._stream = sentinels
    try:
        mod.init(library_path=LIBRARY_PATH,
                 op_call_address=int(ffi.cast("uintptr_t", lib.gk_op_call)),
                 array_type=array_type, array_probe=probe, array_sentinels=sentinels,
                 stream_type=Stream, python_call=python_call, check=check,
                 open_task_streams=_open_task_streams,
                 current_stream_get=_current_stream.get, output_slot=slot,
                 output_slot_address=int(ffi.cast("uintptr_t", slot)),
                 ctype_tensor=ffi.typeof("gk_tensor*"), ctype_stream=ffi.typeof("gk_stream*"),
                 ctype_runtime=ffi.typeof("gk_runtime*"), cdata_probes=cdata_probes())
    finally:
        del probe._t  # its __del__ then releases nothing


def choose(python_call, array_type):
    """The function gpukit.call is: the compiled one, else `python_call`."""
    global ACTIVE, REASON, module
    if os.environ.get("GPUKIT_PURE_PYTHON", "") not in ("", "0"):
        REASON = "GPUKIT_PURE_PYTHON is set"
        return python_call
    path = next((p for p in candidates() if os.path.isfile(p)), None)
    if path is None:
        REASON = f"{FILE_NAME} not built (looked in {', '.join(candidates())})"
        return python_call
    try:
        mod = _load_extension(path)
        init(mod, array_type, python_call)
    except Exception as e:  # noqa: BLE001 — any failure keeps the Python implementation
        REASON = f"{path}: {type(e).__name__}: {e}"
        logging.getLogger("gpukit").debug("gpukit.call: the Python implementation (%s)",
                                          REASON)
        return python_call
    sys.modules[MODULE_NAME] = mod
    module, ACTIVE, REASON = mod, "compiled", ""
    return mod.call
