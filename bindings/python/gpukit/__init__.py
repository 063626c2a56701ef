"""GPUkit for Python: NumPy-like arrays on GPUkit devices, DLPack 1.x exchange, the
runtime's devices, streams, events, memory budgets and plugins, and scheduler tasks with
QoS classes (gpukit.task), model weights (gpukit.load_weights: SafeTensors, GGUF), over the
C ABI (cffi, ABI mode).

``import gpukit`` needs no GPU: without CUDA the runtime runs on the cpu device alone.
"""
from __future__ import annotations

from . import errors
from ._array import GPUArray
from ._call import call
from ._creation import arange, asarray, empty, from_dlpack, from_numpy, full, ones, zeros
from ._dlpack import DLDeviceType
from ._dtypes import bfloat16
from ._operators import (absolute, add, divide, equal, greater, greater_equal, less, less_equal,
                         matmul, max, mean, min, multiply, negative, not_equal, softmax,
                         subtract, sum)
from ._lib import HEADER_PATHS, LIBRARY_PATH, ffi, lib
from ._runtime import (Device, Event, Runtime, Stream, current_stream, default_device, devices,
                       explain, info, memory_stats, ops, plugins, runtime, set_memory_budget)
from ._scheduler import Task, scheduler_info, set_pacing, task
from ._units import parse_memory
from ._weights import Weights, load_weights
from ._tokenizer import Detokenizer, Tokenizer
from . import jit
from .jit import ElementwiseKernel, JitOp, RawKernel, RawModule, register_op
from . import llm
from . import asr
from .errors import *  # noqa: F401,F403

__version__ = "0.1.0"


def library_version() -> str:
    return ffi.string(lib.gk_library_version()).decode()


def abi_version() -> tuple:
    v = lib.gk_abi_version()
    return (v >> 16, v & 0xFFFF)


__all__ = [
    "GPUArray", "call", "asarray", "from_numpy", "from_dlpack", "empty", "zeros", "ones", "full",
    "arange", "matmul", "softmax", "add", "subtract", "multiply", "divide", "negative",
    "absolute", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "sum", "mean", "max", "min", "DLDeviceType", "bfloat16",
    "Runtime", "Device", "Stream", "Event", "runtime", "devices", "default_device",
    "plugins", "ops", "explain", "info", "library_version", "abi_version", "errors",
    "current_stream", "set_memory_budget", "memory_stats", "parse_memory",
    "Task", "task", "scheduler_info", "set_pacing", "Weights", "load_weights",
    "Tokenizer", "Detokenizer", "llm", "asr",
    "RawKernel", "RawModule", "ElementwiseKernel", "JitOp", "register_op", "jit",
    "LIBRARY_PATH", "HEADER_PATHS",
] + list(errors.__all__)
