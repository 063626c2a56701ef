"""ElementwiseKernel: a kernel generated from one element's operation (CuPy's), compiled
per dtype combination, rank and layout.
"""
from __future__ import annotations

import math
import numbers
import re
import threading

import numpy as np

from ._array import GPUArray
from ._creation import empty, from_dlpack
from ._dtypes import _gk_dtype, _np_dtype
from ._jit_module import RawModule, _strings
from ._runtime import runtime as _runtime

_C_TYPES = {1: "float", 2: "double", 3: "__half", 4: "__nv_bfloat16", 5: "signed char",
            6: "short", 7: "int", 8: "long long", 9: "unsigned char", 10: "bool"}
_TYPE_NAMES = {"float32": 1, "float": 1, "float64": 2, "double": 2, "float16": 3, "half": 3,
               "bfloat16": 4, "int8": 5, "int16": 6, "int32": 7, "int": 7, "int64": 8,
               "uint8": 9, "bool": 10}
_PARAM = re.compile(r"^\s*(raw\s+)?([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*$")
_MAX_DIMS = 8


def _parse_params(text: str, what: str) -> list:
    params = []
    for piece in [p for p in text.split(",") if p.strip()]:
        m = _PARAM.match(piece)
        if not m or m.group(1):
            raise ValueError(f"{what}: '{piece.strip()}' is not 'type name' (a dtype such as "
                             "float32, or a one-letter type placeholder such as T)")
        type_name, name = m.group(2), m.group(3)
        if type_name not in _TYPE_NAMES and not re.fullmatch(r"[A-Z]", type_name):
            raise ValueError(f"{what}: type '{type_name}' of '{name}' is neither a dtype "
                             f"({', '.join(sorted(_TYPE_NAMES))}) nor a one-letter placeholder")
        params.append((type_name, name))
    return params


def _broadcast_shape(shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        extent = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if extent not in (1, s[k]):
                raise ValueError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not "
                                 "broadcast")
            extent = s[k]
        out.append(extent)
    return tuple(out)


class ElementwiseKernel:
    """A kernel from one element's operation (CuPy's ElementwiseKernel):
    ``ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")(x, y)`` returns z.

    Parameters are "type name" with a dtype (float32, int64, ...) or a one-letter placeholder
    (T) bound to the dtype of the first input that uses it. Inputs may be GPUArrays, DLPack
    producers (torch, CuPy, JAX tensors: no copy) or Python/NumPy scalars; inputs broadcast
    as NumPy does, and outputs (given after the inputs, or allocated as GPUArrays on the
    inputs' device) take the broadcast shape. One kernel is compiled per dtype combination,
    rank and layout (contiguous alike, or strided); shapes and strides are launch arguments.
    ``preamble`` is code placed before the kernel (helper functions, #include lines)."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str,
                 options=(), preamble: str = ""):
        self.in_params = _parse_params(in_params, "in_params")
        self.out_params = _parse_params(out_params, "out_params")
        if not self.out_params:
            raise ValueError("out_params names no output")
        names = [n for _, n in self.in_params + self.out_params]
        if len(set(names)) != len(names):
            raise ValueError(f"parameter names repeat: {names}")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ValueError(f"name '{name}' is not a C identifier")
        self.operation = operation
        self.name = name
        self.options = tuple(_strings(options, "options"))
        self.preamble = preamble
        self._kernels = {}
        self._lock = threading.Lock()

    def _source(self, types: dict, kinds: list, ndim: int, contiguous: bool) -> str:
        """The kernel for one binding: kinds[i] is "array" or "scalar" per parameter."""
        params = self.in_params + self.out_params
        lines = []
        if 3 in types.values():
            lines.append("#include <cuda_fp16.h>")
        if 4 in types.values():
            lines.append("#include <cuda_bf16.h>")
        lines.append(self.preamble)
        for placeholder, gk in sorted(types.items()):
            if len(placeholder) == 1:
                lines.append(f"typedef {_C_TYPES[gk]} {placeholder};")
        num_arrays = sum(1 for k in kinds if k == "array")
        if not contiguous:
            lines.append(f"struct {self.name}_index {{ long long shape[{max(ndim, 1)}]; "
                         f"long long stride[{max(num_arrays, 1)}][{max(ndim, 1)}]; }};")
        sig = []
        for (type_name, pname), kind in zip(params, kinds):
            ctype = _C_TYPES[types[type_name]]
            sig.append(f"{ctype}* {pname}_ptr" if kind == "array"
                       else f"{ctype} {pname}")
        if not contiguous:
            sig.append(f"{self.name}_index index")
        sig.append("long long n")
        body = [f'extern "C" __global__ void {self.name}({", ".join(sig)}) {{',
                "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;",
                "       i += (long long)gridDim.x * blockDim.x) {"]
        if contiguous:
            offsets = ["i"] * num_arrays
        else:
            offsets = [f"o{k}" for k in range(num_arrays)]
            body.append("    " + " ".join(f"long long o{k} = 0;" for k in range(num_arrays)))
            body.append("    long long rest = i;")
            body.append(f"    for (int d = {ndim - 1}; d >= 0; --d) {{")
            body.append("      long long c = rest % index.shape[d];")
            body.append("      rest /= index.shape[d];")
            for k in range(num_arrays):
                body.append(f"      o{k} += c * index.stride[{k}][d];")
            body.append("    }")
        a = 0
        for (type_name, pname), kind in zip(params, kinds):
            if kind == "array":
                body.append(f"    {_C_TYPES[types[type_name]]}& {pname} = {pname}_ptr[{offsets[a]}];")
                a += 1
        body.append(f"    {self.operation};")
        body += ["  }", "}"]
        return "\n".join(lines + body) + "\n"

    def __call__(self, *args, size=None, block_size: int = 256, stream=None):
        n_in, n_out = len(self.in_params), len(self.out_params)
        if len(args) not in (n_in, n_in + n_out):
            raise TypeError(f"{self.name} takes {n_in} inputs (and optionally {n_out} outputs); "
                            f"{len(args)} arguments given")
        rt = _runtime()
        values, kinds, types = [], [], {}
        device = None
        # Arrays bind the placeholders first; scalars take the type their parameter has.
        for (type_name, pname), a in zip(self.in_params, args[:n_in]):
            if isinstance(a, (numbers.Number, np.generic)) and not isinstance(a, np.ndarray):
                kinds.append("scalar")
                values.append(a)
                continue
            arr = a if isinstance(a, GPUArray) else from_dlpack(a)
            if device is None:
                device = arr.device
            elif arr.device != device:
                raise ValueError(f"{self.name}: input '{pname}' is on {arr.device}, the "
                                 f"first array input on {device}")
            kinds.append("array")
            values.append(arr)
            want = _TYPE_NAMES.get(type_name) or types.setdefault(type_name, arr._gk_dtype)
            if want != arr._gk_dtype:
                raise TypeError(f"{self.name}: input '{pname}' is {arr.dtype_name} but "
                                f"{type_name} is {_C_TYPES[want]} here")
        for (type_name, pname), a, kind in zip(self.in_params, values, kinds):
            if type_name in _TYPE_NAMES:
                types[type_name] = _TYPE_NAMES[type_name]
            elif kind == "scalar" and type_name not in types:
                types[type_name] = _gk_dtype(np.float32 if isinstance(a, float)
                                             else np.asarray(a).dtype)
        if device is None:
            device = rt.default_device()
        shape = _broadcast_shape([v.shape for v, k in zip(values, kinds) if k == "array"])
        if size is not None:
            shape = (int(size),) if not shape else shape
        outs = list(args[n_in:])
        for type_name, pname in self.out_params:
            if type_name in _TYPE_NAMES:
                types[type_name] = _TYPE_NAMES[type_name]
            elif type_name not in types:
                if outs:
                    continue  # bound below from the given output
                raise TypeError(f"{self.name}: output '{pname}' has type {type_name}, which no "
                                "input binds; pass the output array")
        out_arrays = []
        for i, (type_name, pname) in enumerate(self.out_params):
            if outs:
                o = outs[i] if isinstance(outs[i], GPUArray) else from_dlpack(outs[i])
                if o.shape != shape:
                    raise ValueError(f"{self.name}: output '{pname}' has shape {o.shape}; the "
                                     f"inputs broadcast to {shape}")
                types.setdefault(type_name, o._gk_dtype)
                if types[type_name] != o._gk_dtype:
                    raise TypeError(f"{self.name}: output '{pname}' is {o.dtype_name}, the "
                                    f"kernel binds {type_name} to another dtype")
            else:
                o = empty(shape, dtype=_np_dtype(types[type_name]), device=device)
            out_arrays.append(o)
            values.append(o)
            kinds.append("array")
        arrays = [v for v, k in zip(values, kinds) if k == "array"]
        ndim = len(shape)
        if ndim > _MAX_DIMS:
            raise ValueError(f"{self.name}: {ndim} dimensions; at most {_MAX_DIMS}")
        n = math.prod(shape)
        contiguous = all(a.shape == shape and a.is_contiguous for a in arrays)
        key = (id(rt), device.id, tuple(sorted(types.items())), tuple(kinds), ndim, contiguous)
        fn = self._kernels.get(key)
        if fn is None:
            with self._lock:
                fn = self._kernels.get(key)
                if fn is None:
                    source = self._source(types, kinds, ndim, contiguous)
                    module = RawModule(source, self.options, device=device,
                                       name=f"{self.name}.cu")
                    fn = module.get_function(self.name)
                    self._kernels[key] = fn
        if n == 0:
            return out_arrays[0] if n_out == 1 else tuple(out_arrays)
        launch_args = []
        for (type_name, _), v, k in zip(self.in_params + self.out_params, values, kinds):
            if k == "array":
                launch_args.append(v)
            else:
                launch_args.append(np.asarray(v).astype(_np_dtype(types[type_name]))[()]
                                   if types[type_name] in (1, 2, 7, 8) else
                                   np.asarray(v).astype(_np_dtype(types[type_name])).tobytes())
        if not contiguous:
            launch_args.append(self._index_bytes(shape, arrays))
        launch_args.append(np.int64(n))
        grid = min(-(-n // block_size), 65535 * 8)
        fn(grid, block_size, launch_args, stream=stream)
        return out_arrays[0] if n_out == 1 else tuple(out_arrays)

    @staticmethod
    def _index_bytes(shape, arrays) -> bytes:
        ndim = max(len(shape), 1)
        index = np.zeros(ndim + len(arrays) * ndim, dtype=np.int64)
        index[:len(shape)] = shape
        for k, a in enumerate(arrays):
            strides = a.element_strides
            offset = len(shape) - a.ndim
            for d in range(a.ndim):
                # A broadcast dimension (extent 1 against a larger one) steps by 0.
                if a.shape[d] != 1 or shape[d + offset] == 1:
                    index[ndim + k * ndim + d + offset] = strides[d]
        return index.tobytes()
