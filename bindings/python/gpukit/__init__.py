"""GPUkit for Python: NumPy-like arrays on GPUkit devices, DLPack 1.x exchange, and the
runtime's devices, streams, events and plugins, over the C ABI (cffi, ABI mode).

``import gpukit`` needs no GPU: without CUDA the runtime runs on the cpu device alone.
"""
from __future__ import annotations

from . import errors
from ._array import (DLDeviceType, GPUArray, absolute, add, arange, asarray, bfloat16, divide,
                     empty, from_dlpack, from_numpy, full, matmul, max, mean, min, multiply,
                     negative, ones, softmax, subtract, sum, zeros)
from ._lib import HEADER_PATHS, LIBRARY_PATH, ffi, lib
from ._runtime import (Device, Event, Runtime, Stream, default_device, devices, explain, info,
                       ops, plugins, runtime)
from .errors import *  # noqa: F401,F403

__version__ = "0.1.0"


def call(op: str, inputs, attrs: dict | None = None, out=None, num_outputs: int = 1,
         stream=None):
    """Runs op `op` (docs/ops.md) once through the C ABI: the generic form behind every
    named function. `attrs` maps attribute names to values; `out` (an array or a list)
    receives the outputs, which are allocated when it is None."""
    from ._array import _call

    return _call(op, list(inputs), attrs, out, num_outputs, stream)


def library_version() -> str:
    return ffi.string(lib.gk_library_version()).decode()


def abi_version() -> tuple:
    v = lib.gk_abi_version()
    return (v >> 16, v & 0xFFFF)


__all__ = [
    "GPUArray", "call", "asarray", "from_numpy", "from_dlpack", "empty", "zeros", "ones", "full",
    "arange", "matmul", "softmax", "add", "subtract", "multiply", "divide", "negative",
    "absolute", "sum", "mean", "max", "min", "DLDeviceType", "bfloat16",
    "Runtime", "Device", "Stream", "Event", "runtime", "devices", "default_device",
    "plugins", "ops", "explain", "info", "library_version", "abi_version", "errors",
    "LIBRARY_PATH", "HEADER_PATHS",
] + list(errors.__all__)
