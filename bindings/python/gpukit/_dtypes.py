"""Dtypes: gk_dtype codes and their NumPy counterparts, element sizes, block-quantized
(packed) dtypes, and the gk_tensor_desc of a dtype and shape.

Names, element sizes and blocks come from the C ABI (gk_dtype_name, gk_dtype_size,
gk_dtype_block) once, at import, for every GK_DTYPE_* the headers declare: the core owns
those facts. What the ABI has no query for is a table here, each saying so.
"""
from __future__ import annotations

import builtins as _b
import numbers

import numpy as np

from ._lib import ffi, lib

try:  # bfloat16 as a NumPy dtype, when available
    import ml_dtypes as _ml_dtypes

    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    _BF16 = None

bfloat16 = _BF16

_F32, _F64, _F16, _BF16_CODE = lib.GK_DTYPE_F32, lib.GK_DTYPE_F64, lib.GK_DTYPE_F16, \
    lib.GK_DTYPE_BF16
_BOOL = lib.GK_DTYPE_BOOL


def _abi_dtypes():
    """{gk_dtype: (name, elements per block, bytes per block)} for every GK_DTYPE_* of the
    headers, as the library describes them (a plain dtype's block is 1 element of its
    size)."""
    block_bytes = ffi.new("uint32_t*")
    out = {}
    for code in sorted(getattr(lib, n) for n in dir(lib) if n.startswith("GK_DTYPE_")):
        block = lib.gk_dtype_block(code, block_bytes)
        out[code] = (ffi.string(lib.gk_dtype_name(code)).decode(), block, block_bytes[0])
    return out


_ABI_DTYPES = _abi_dtypes()
# Plain dtypes: gk_dtype -> name ("f32") and bytes per element.
_GK_NAMES = {gk: name for gk, (name, block, _) in _ABI_DTYPES.items() if block == 1}
_ITEMSIZE = {gk: lib.gk_dtype_size(gk) for gk in _GK_NAMES}
# Block-quantized dtypes (GGUF's; gpukit_weights.h): gk_dtype -> (name, elements per block,
# bytes per block). A tensor of one is packed: its shape counts elements, its innermost
# dimension is a multiple of the block, it is contiguous, and it has no NumPy element type.
# Arrays of them come from gpukit.load_weights.
_PACKED = {gk: info for gk, info in _ABI_DTYPES.items() if info[1] > 1}
_PACKED_BY_NAME = {name: gk for gk, (name, _, _) in _PACKED.items()}

# gk_dtype <-> NumPy: the ABI knows nothing of NumPy, so this pairing is ours.
_NP_TO_GK = {np.dtype(np.float32): _F32, np.dtype(np.float64): _F64,
             np.dtype(np.float16): _F16, np.dtype(np.int8): lib.GK_DTYPE_I8,
             np.dtype(np.int16): lib.GK_DTYPE_I16, np.dtype(np.int32): lib.GK_DTYPE_I32,
             np.dtype(np.int64): lib.GK_DTYPE_I64, np.dtype(np.uint8): lib.GK_DTYPE_U8,
             np.dtype(np.bool_): _BOOL}
if _BF16 is not None:
    _NP_TO_GK[_BF16] = _BF16_CODE
_GK_TO_NP = {v: k for k, v in _NP_TO_GK.items()}
# The dtypes op "cast" serves (docs/ops.md); no ABI query says which dtypes an op takes
# without a call to ask about.
_CASTABLE = {_F32, _F64, _F16, _BF16_CODE, lib.GK_DTYPE_I32, lib.GK_DTYPE_I64}
# Floating-point dtypes: the ABI has no query for the kind of a dtype.
_FLOATING = {_F32, _F64, _F16, _BF16_CODE}
_SUPPORTED_TEXT = ("float32, float64, float16, bfloat16 (with ml_dtypes), int8, int16, "
                   "int32, int64, uint8, bool")
_INT64_MAX = 2**63 - 1
_T_GK_TENSOR_DESC = ffi.typeof("gk_tensor_desc*")
_SZ_GK_TENSOR_DESC = ffi.sizeof("gk_tensor_desc")


def _dtype_name(gk: int) -> str:
    """The gk_dtype_name of a plain or block-quantized dtype ("f32", "q4_k")."""
    return _GK_NAMES[gk] if gk in _GK_NAMES else _PACKED[gk][0]


def _packed_bytes(gk: int, count: int) -> int:
    """Bytes of `count` elements of block-quantized dtype `gk` (whole blocks)."""
    _, block, block_bytes = _PACKED[gk]
    return -(-count // block) * block_bytes


def _packed_error(gk: int, what: str) -> TypeError:
    name, block, block_bytes = _PACKED[gk]
    return TypeError(
        f"{what}: dtype {name} is block-quantized (packed in blocks of {block} elements, "
        f"{block_bytes} bytes each) and has no NumPy element type; load the weights with "
        f"dtype=\"f32\" (or \"f16\", \"bf16\") to get them dequantized, or read the packed "
        "bytes with .raw_bytes()")


def _gk_dtype(dtype) -> int:
    if isinstance(dtype, str) and dtype in _PACKED_BY_NAME:
        return _PACKED_BY_NAME[dtype]
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        if _BF16 is None:
            return _BF16_CODE
        dtype = _BF16
    if isinstance(dtype, str):
        for k, v in _GK_NAMES.items():
            if v == dtype:
                return k
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"unsupported dtype {dtype!r}; supported: {_SUPPORTED_TEXT}") from e
    if not d.isnative:
        d = d.newbyteorder("=")  # the values are converted to native order when copied
    if d not in _NP_TO_GK:
        raise TypeError(f"unsupported dtype {d}; supported: {_SUPPORTED_TEXT}")
    return _NP_TO_GK[d]


def _np_dtype(gk: int):
    if gk in _GK_TO_NP:
        return _GK_TO_NP[gk]
    if gk in _PACKED:
        raise _packed_error(gk, "no NumPy dtype")
    raise TypeError("bfloat16 arrays need the ml_dtypes package to be seen from NumPy "
                    "(pip install ml_dtypes)")


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= _b.max(n, 1)
    return tuple(reversed(strides))


def _check_shape(shape, gk_dtype: int) -> None:
    """Refuses a shape the C ABI cannot describe: more than GK_MAX_DIMS dimensions, a
    dimension that is negative or not an integer, or an element count or byte size past
    int64 (a shape such as (2**61,) of float64 would overflow the size computations)."""
    if len(shape) > lib.GK_MAX_DIMS:
        raise ValueError(f"{len(shape)} dimensions; GPUkit tensors have at most "
                         f"{lib.GK_MAX_DIMS}")
    count = 1
    for i, n in enumerate(shape):
        if not isinstance(n, (numbers.Integral, np.integer)) or isinstance(n, bool):
            raise TypeError(f"shape {tuple(shape)}: dimension {i} is a {type(n).__name__}, "
                            "not an integer")
        if n < 0:
            raise ValueError(f"shape {tuple(shape)}: dimension {i} is {n}; negative "
                             "dimensions are not allowed")
        count *= int(n)
    if count > _INT64_MAX:
        raise ValueError(f"shape {tuple(shape)} has {count} elements, more than the "
                         f"2**63 - 1 a GPUkit tensor can hold")
    if gk_dtype in _PACKED:
        name, block, _ = _PACKED[gk_dtype]
        if not shape or shape[-1] % block:
            raise ValueError(f"shape {tuple(shape)} of {name}: the innermost dimension must "
                             f"be a multiple of the block of {block} elements")
        nbytes = _packed_bytes(gk_dtype, count)
    else:
        nbytes = count * _ITEMSIZE[gk_dtype]
    if nbytes > _INT64_MAX:
        raise ValueError(f"shape {tuple(shape)} of {_dtype_name(gk_dtype)} is "
                         f"{nbytes} bytes, more than the 2**63 - 1 a "
                         "GPUkit tensor can hold")


def _desc_for(gk_dtype: int, shape, strides=None, flags: int = 0):
    _check_shape(shape, gk_dtype)
    d = ffi.new(_T_GK_TENSOR_DESC)
    d.struct_size = _SZ_GK_TENSOR_DESC
    d.dtype = gk_dtype
    d.ndim = len(shape)
    for i, n in enumerate(shape):
        d.shape[i] = int(n)
    if strides is not None:
        for i, s in enumerate(strides):
            d.strides[i] = int(s)
        d.has_strides = 1
    d.flags = flags
    return d
