"""Loads libgpukit through cffi in ABI mode; the declarations come from the headers.

Where the library is found, first match wins:
  1. $GPUKIT_LIBRARY (a path to libgpukit.so),
  2. libgpukit.so* inside this package (a pip-installed wheel),
  3. a CMake build tree of the checkout this package sits in: <repo>/build/lib, then
     the most recently built <repo>/build*/lib.
Headers: $GPUKIT_INCLUDE_DIR, this package's include/, <libdir>/../include, then the
checkout's abi/include.
"""
from __future__ import annotations

import glob
import os
import threading

import cffi

from ._cdef import cdef_from_headers
from .errors import error_for_status

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.abspath(os.path.join(_HERE, "..", "..", ".."))
_HEADERS = ("gpukit.h", "gpukit_dlpack.h", "gpukit_jit.h", "gpukit_audio.h", "gpukit_asr.h")


def _find_library() -> str:
    env = os.environ.get("GPUKIT_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise ImportError(f"GPUKIT_LIBRARY={env!r} is not a file")
        return os.path.abspath(env)
    found = sorted(glob.glob(os.path.join(_HERE, "libgpukit.so*")), key=len)
    if found:
        return found[0]
    preferred = os.path.join(_REPO, "build", "lib", "libgpukit.so")
    if os.path.isfile(preferred):
        return preferred
    trees = [p for p in glob.glob(os.path.join(_REPO, "build*", "lib", "libgpukit.so"))
             if os.path.isfile(p)]
    if trees:
        return max(trees, key=os.path.getmtime)
    raise ImportError(
        "libgpukit.so not found: set GPUKIT_LIBRARY=/path/to/build/lib/libgpukit.so, build "
        f"the checkout into {_REPO}/build, or pip install the package")


def _find_headers(library: str) -> list:
    candidates = [os.environ.get("GPUKIT_INCLUDE_DIR", ""),
                  os.path.join(_HERE, "include"),
                  os.path.join(os.path.dirname(library), "..", "include"),
                  os.path.join(_REPO, "abi", "include")]
    for base in candidates:
        if base and all(os.path.isfile(os.path.join(base, "gpukit", h)) for h in _HEADERS):
            return [os.path.join(base, "gpukit", h) for h in _HEADERS]
    raise ImportError("gpukit headers (gpukit/gpukit.h, gpukit/gpukit_dlpack.h) not found; "
                      "set GPUKIT_INCLUDE_DIR")


LIBRARY_PATH = _find_library()
HEADER_PATHS = _find_headers(LIBRARY_PATH)
ffi = cffi.FFI()
ffi.cdef(cdef_from_headers(HEADER_PATHS))
lib = ffi.dlopen(LIBRARY_PATH)

_lock = threading.Lock()


def last_error() -> str:
    return ffi.string(lib.gk_last_error()).decode("utf-8", "replace")


def check(status: int, what: str = "") -> None:
    """Raises the GpukitError subclass for a failed status, with the C message."""
    if status != 0:
        message = last_error() or ffi.string(lib.gk_status_name(status)).decode()
        raise error_for_status(status, message)


def take_string(ptr) -> str:
    """Copies a library-allocated char* and frees it with gk_string_free."""
    try:
        return ffi.string(ptr).decode("utf-8", "replace")
    finally:
        lib.gk_string_free(ptr)
