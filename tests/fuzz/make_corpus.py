#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/<target>/<seed>.

The binary targets decode their input with tests/fuzz/fuzz_input.h; the encoders below
produce the selector bytes it reads, so each seed is a readable line of this file (a
descriptor, an op, a view, a DLPack tensor). The manifest seeds are YAML text. Run it after
changing an input format and commit the result:

    python3 tests/fuzz/make_corpus.py
"""
import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"

# fuzz_input.h: kEdgeIntegers and kEdgeNdims, by value.
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
EDGE_INTEGERS = [INT64_MAX, INT64_MIN, 2**31, 2**31 - 1, 2**32, 2**32 + 1, 2**61, 2**62,
                 2**62 + 1, 3037000500, 2**40, -(2**62), -(2**32), 2**32 - 1, INT64_MAX - 1,
                 2**21]
EDGE_NDIMS = [9, 10, 16, 40, 64, 255, 1 << 16, 2**31 - 1, -1, -2, -8, -40, -(1 << 16), -(2**31),
              8, 0]
# fuzz_input.h: kAttrNames and kAttrStrings, by index.
ATTR_NAMES = ["axes", "keepdims", "axis", "transpose_a", "transpose_b", "alpha", "beta",
              "activation", "precision", "approximate", "dtype", "", "bogus"]
ATTR_STRINGS = ["none", "tanh", "relu", "gelu", "silu", "highest", "tf32", "bf16", "f32", "i64",
                "", "bogus", "non-utf-8", "f32\\x01"]
# fuzz_tensor_desc.cpp: kOps.
OPS = ["add", "mul", "div", "neg", "relu", "gelu", "swiglu", "cast", "sum", "mean", "max",
       "argmax", "softmax", "log_softmax", "layernorm", "rmsnorm", "add_rmsnorm", "matmul",
       "no_such_op", ""]
F32, F64, F16, BF16, I8, I16, I32, I64, U8, BOOL = range(1, 11)
READ_ONLY = 1
ATTR_INT, ATTR_FLOAT, ATTR_STRING, ATTR_INTS = 1, 2, 3, 4


def integer(v):
    """Input::integer(): the shortest selector that decodes to v."""
    if 0 <= v <= 8:
        return bytes([v << 3])
    if 1 <= v <= 32:
        return bytes([((v - 1) << 3) | 3])
    if -4 <= v <= -1:
        return bytes([((-1 - v) << 3) | 4])
    if v in EDGE_INTEGERS:
        return bytes([(EDGE_INTEGERS.index(v) << 3) | 5])
    if 0 <= v < 2**16:
        return bytes([6]) + struct.pack("<H", v)
    return bytes([7]) + struct.pack("<q", v)


def ndim(n):
    if 0 <= n <= 8:
        return bytes([n])
    return bytes([0xF0 + EDGE_NDIMS.index(n)])


def dtype(d):
    return bytes([d]) if 0 <= d <= 11 else bytes([0xFF]) + struct.pack("<i", d)


# decode_desc's struct_size forms (selector (index << 2) | 3); None is sizeof(gk_tensor_desc).
SIZE_ZERO, SIZE_8, SIZE_SHORT, SIZE_MIN, SIZE_PLUS_8, SIZE_PLUS_64 = range(6)


def desc(dt, shape, strides=None, flags=0, size=None, nd=None, stray_strides=None):
    """decode_desc: a descriptor; nd overrides ndim (then 8 dims are read when it is out of
    range), stray_strides gives strides with has_strides 0."""
    nd = len(shape) if nd is None else nd
    filled = nd if 0 <= nd <= 8 else 8
    shape = list(shape) + [0] * (filled - len(shape))
    out = bytes([0 if size is None else (size << 2) | 3]) + dtype(dt) + ndim(nd)
    out += b"".join(integer(v) for v in shape[:filled])
    if strides is not None:
        out += bytes([1]) + b"".join(integer(v) for v in strides[:filled])
    elif stray_strides is not None:
        out += bytes([4]) + b"".join(integer(v) for v in stray_strides[:filled])
    else:
        out += bytes([0])
    if flags in (0, READ_ONLY):
        out += bytes([0 if flags == 0 else 2])
    else:
        out += bytes([(flags & 0xFC) | 3])
    return out


def real(v):
    edges = [-1.0, 0.5, 1e308, -1e308, float("inf"), float("-inf")]
    if v == 0.0:
        return bytes([0])
    if v == 1.0:
        return bytes([4])
    if v in edges:
        return bytes([(edges.index(v) << 2) | 2])
    return bytes([3]) + struct.pack("<d", v)


def attrs(*items):
    """Attrs::decode: (name, type, value) items; INTS values are lists of up to 8."""
    out = bytes([len(items)])
    for name, kind, value in items:
        known = ATTR_INT <= kind <= ATTR_INTS
        out += bytes([ATTR_NAMES.index(name), kind - 1 if known else ((kind + 8) << 3) | 6])
        if kind == ATTR_INT or not known:
            out += integer(value)
        elif kind == ATTR_FLOAT:
            out += real(value)
        elif kind == ATTR_STRING:
            out += bytes([ATTR_STRINGS.index(value)])
        else:
            values = list(value) + [0] * (8 - len(value))
            out += bytes([len(value) + 1]) + b"".join(integer(v) for v in values)
    return out


def op_input(op, inputs, attr=attrs(), output_index=0, num_outputs=1, device=0, fill=b""):
    """fuzz_tensor_desc.cpp: op, device, inputs, attrs, output index, output count, fill."""
    out = bytes([OPS.index(op), device, len(inputs)]) + b"".join(inputs) + attr
    return out + bytes([output_index + 1, num_outputs - 1]) + fill


TENSOR_DESC = {
    "add_f32": op_input("add", [desc(F32, [2, 3]), desc(F32, [3])], fill=bytes(range(48))),
    "add_broadcast_i32": op_input("add", [desc(I32, [4, 1]), desc(I32, [1, 5])]),
    "mul_bf16": op_input("mul", [desc(BF16, [8]), desc(BF16, [8])]),
    "div_f16_scalar": op_input("div", [desc(F16, []), desc(F16, [3])]),
    "neg_i8": op_input("neg", [desc(I8, [5])]),
    "gelu_tanh": op_input("gelu", [desc(F32, [4])], attrs(("approximate", ATTR_STRING, "tanh"))),
    "swiglu": op_input("swiglu", [desc(F32, [2, 4]), desc(F32, [2, 4])]),
    "cast_to_bf16": op_input("cast", [desc(F32, [3])], attrs(("dtype", ATTR_STRING, "bf16"))),
    "sum_axes_keepdims": op_input(
        "sum", [desc(F32, [2, 3, 4])],
        attrs(("axes", ATTR_INTS, [0, -1]), ("keepdims", ATTR_INT, 1))),
    "sum_all_i64": op_input("sum", [desc(I64, [7])]),
    "mean_empty_dim": op_input("mean", [desc(F64, [0, 3])], attrs(("axes", ATTR_INTS, [1]))),
    "max_axis_repeat": op_input("max", [desc(F32, [2, 2])], attrs(("axes", ATTR_INTS, [1, 1]))),
    "argmax_axis": op_input("argmax", [desc(F32, [3, 4])], attrs(("axis", ATTR_INT, -1))),
    "softmax_axis": op_input("softmax", [desc(F32, [2, 5])], attrs(("axis", ATTR_INT, 1))),
    "log_softmax_axis_out_of_range": op_input(
        "log_softmax", [desc(F32, [2, 5])], attrs(("axis", ATTR_INT, 2**31))),
    "layernorm_weight_bias": op_input(
        "layernorm", [desc(F32, [2, 4]), desc(F32, [4]), desc(F32, [4])]),
    "rmsnorm": op_input("rmsnorm", [desc(BF16, [3, 8]), desc(BF16, [8])]),
    "add_rmsnorm_two_outputs": op_input(
        "add_rmsnorm", [desc(F32, [2, 4]), desc(F32, [2, 4]), desc(F32, [4])],
        output_index=1, num_outputs=2),
    "matmul": op_input("matmul", [desc(F32, [2, 3]), desc(F32, [3, 4])]),
    "matmul_transpose_bias_gelu": op_input(
        "matmul", [desc(F16, [3, 2]), desc(F16, [4, 3]), desc(F16, [4])],
        attrs(("transpose_a", ATTR_INT, 1), ("transpose_b", ATTR_INT, 1),
              ("activation", ATTR_STRING, "gelu"), ("alpha", ATTR_FLOAT, 0.5))),
    "matmul_batch_broadcast": op_input("matmul", [desc(F32, [2, 1, 2, 3]), desc(F32, [4, 3, 2])]),
    "matmul_beta_tf32": op_input(
        "matmul", [desc(F32, [2, 2]), desc(F32, [2, 2])],
        attrs(("beta", ATTR_FLOAT, 1.0), ("precision", ATTR_STRING, "tf32"))),
    "unknown_op": op_input("no_such_op", [desc(F32, [1])]),
    "unknown_attr_type": op_input("sum", [desc(F32, [2])], attrs(("axes", 12, 0))),
    "desc_struct_size_zero": op_input("neg", [desc(F32, [2], size=SIZE_ZERO)]),
    "desc_struct_size_larger": op_input("neg", [desc(F32, [2], size=SIZE_PLUS_64)]),
    "desc_read_only_strided": op_input("neg", [desc(F32, [2, 2], strides=[2, 1], flags=READ_ONLY)]),
    "desc_stray_strides": op_input("neg", [desc(F32, [2, 2], stray_strides=[5, 7])]),
    "desc_unknown_dtype": op_input("add", [desc(11, [2]), desc(0, [2])]),
    "desc_unknown_flags": op_input("neg", [desc(F32, [2], flags=0xF0)]),
    "desc_ndim_9": op_input("neg", [desc(F32, [1] * 8, nd=9)]),
    "desc_negative_dim": op_input("neg", [desc(F32, [2, -1])]),
    "desc_dim_2_62": op_input("neg", [desc(F64, [2**62])]),
    "desc_dims_2_32_squared": op_input("sum", [desc(F32, [2**32, 2**32])]),
    "desc_dims_sqrt_2_63": op_input("sum", [desc(U8, [3037000500, 3037000500])]),
    "device_other": op_input("add", [desc(F32, [2]), desc(F32, [2])], device=7),
}


def view_input(size, offset_selector, d, order=0, action=0, attr=attrs(), evictable=False,
               fill=b""):
    """fuzz_view.cpp: buffer size, flags, offset, desc, order, action, attrs, fill."""
    return (struct.pack("<H", size) + bytes([1 if evictable else 0]) + offset_selector + d +
            bytes([order, action]) + attr + fill)


def offset_small(v):
    return bytes([1]) + struct.pack("<H", v)


def offset_edge(index):
    """decode_offset's kEdges: UINT64_MAX, UINT64_MAX-7, 2^63, 2^63-1, 2^62, 2^32, 4096, 4097."""
    return bytes([(index << 2) | 2])


VIEW = {
    "contiguous_neg": view_input(64, bytes([0]), desc(F32, [4, 4]), action=0),
    "strided_sum": view_input(256, offset_small(16), desc(F32, [3, 4], strides=[8, 2]), action=1,
                              attr=attrs(("axes", ATTR_INTS, [1]))),
    "negative_strides_softmax": view_input(
        256, offset_small(60), desc(F32, [4, 4], strides=[-4, -1]), action=2),
    "zero_stride_add": view_input(16, bytes([0]), desc(F32, [1000], strides=[0]), action=3),
    "cast_i32": view_input(64, offset_small(4), desc(I32, [8]), action=4,
                           attr=attrs(("dtype", ATTR_STRING, "i64"))),
    "in_place_abs": view_input(64, bytes([0]), desc(F32, [4, 2], strides=[1, 4]), action=5),
    "in_place_read_only": view_input(64, bytes([0]), desc(F32, [4], flags=READ_ONLY), action=5),
    "overlapping_in_place": view_input(64, bytes([0]), desc(F32, [4, 4], strides=[1, 1]),
                                       action=5),
    "copy_to_host": view_input(128, offset_small(8), desc(F64, [2, 3]), action=6),
    "copy_to_host_strided": view_input(128, bytes([0]), desc(F64, [2, 3], strides=[1, 2]),
                                       action=6),
    "get_desc_max": view_input(64, bytes([0]), desc(BF16, [4, 4]), action=7,
                               attr=attrs(("axes", ATTR_INTS, [-1]), ("keepdims", ATTR_INT, 1))),
    "buffer_freed_first": view_input(64, bytes([0]), desc(F32, [16]), order=1),
    "evictable": view_input(64, bytes([0]), desc(F32, [16]), evictable=True, action=1),
    "empty_buffer_empty_view": view_input(0, bytes([0]), desc(F32, [0, 5])),
    "view_past_end": view_input(64, offset_small(60), desc(F32, [2])),
    "misaligned_offset": view_input(64, offset_small(2), desc(F32, [2])),
    "offset_u64_max": view_input(64, offset_edge(0), desc(U8, [1])),
    "offset_2_63": view_input(64, offset_edge(2), desc(F32, [0])),
    "huge_stride": view_input(64, bytes([0]), desc(F32, [2], strides=[2**62])),
    "stride_min": view_input(64, bytes([0]), desc(F32, [2], strides=[INT64_MIN])),
    "huge_dim_zero_stride": view_input(64, bytes([0]), desc(F32, [INT64_MAX], strides=[0])),
    "ndim_40": view_input(64, bytes([0]), desc(F32, [1] * 8, nd=40)),
    "negative_ndim": view_input(64, bytes([0]), desc(F32, [1] * 8, nd=-1)),
}

# fuzz_dlpack.cpp: kTypes and kBits, by value.
DL_TYPES = [1, 3, 2, 13, 10, 14, 0, -1, 1000]
DL_BITS = [8, 16, 32, 64, 0, 1, 4, 128, 255, 7]
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_OPAQUE, KDL_BFLOAT, KDL_COMPLEX, KDL_BOOL = range(7)
DL_READ_ONLY, DL_IS_COPIED = 1, 2


def dl_input(code, bits, shape, strides=None, versioned=True, major=1, minor=1, flags=0,
             device_type=1, device_id=0, lanes=1, nd=None, null_shape=False, data=("host", 0),
             byte_offset=0, deleter=True, action=0):
    """fuzz_dlpack.cpp: form, version, flags, device, dtype, ndim, shape, strides, data,
    byte offset, deleter, action."""
    out = bytes([1 if versioned else 0])
    out += bytes([0]) if major == 1 else bytes([([0, 2, 1000, 2**32 - 1].index(major) << 2) | 3])
    out += bytes([minor])
    out += bytes([flags]) if flags in (0, 1, 2) else bytes([3]) + struct.pack("<Q", flags)
    out += bytes([0]) if device_type == 1 else bytes([(DL_TYPES.index(device_type) << 2) | 3])
    out += bytes([0]) if device_id == 0 else bytes([3]) + integer(device_id)
    out += bytes([code, DL_BITS.index(bits)])
    out += bytes([0]) if lanes == 1 else bytes([15]) if lanes == 0 else (
        bytes([7]) + struct.pack("<H", lanes))
    nd = len(shape) if nd is None else nd
    entries = max(0, min(nd, 64))
    shape = list(shape) + [1] * (entries - len(shape))
    out += ndim(nd) + b"".join(integer(v) for v in shape[:entries])
    arrays = (1 if strides is not None else 0) | (6 if null_shape else 0)
    out += bytes([arrays])
    if strides is not None:
        strides = list(strides) + [1] * (entries - len(strides))
        out += b"".join(integer(v) for v in strides[:entries])
    kind, value = data
    if kind == "null":
        out += bytes([0])
    elif kind == "host":
        out += bytes([1]) + struct.pack("<H", value)
    else:
        out += bytes([3]) + struct.pack("<Q", value)
    if byte_offset == 0:
        out += bytes([0])
    elif byte_offset < 4096 + 16:
        out += bytes([1]) + struct.pack("<H", byte_offset)
    else:
        out += bytes([3]) + struct.pack("<Q", byte_offset)
    return out + bytes([1 if deleter else 0, action])


DLPACK = {
    "versioned_f32_neg": dl_input(KDL_FLOAT, 32, [2, 3], action=0),
    "versioned_read_only_write": dl_input(KDL_FLOAT, 32, [4], flags=DL_READ_ONLY, action=1),
    "versioned_relu_in_place": dl_input(KDL_FLOAT, 64, [2, 2], action=1),
    "versioned_round_trip": dl_input(KDL_BFLOAT, 16, [3, 2], strides=[1, 3], action=2),
    "legacy_i32_neg": dl_input(KDL_INT, 32, [5], versioned=False),
    "legacy_no_deleter": dl_input(KDL_UINT, 8, [7], versioned=False, deleter=False, action=2),
    "negative_strides": dl_input(KDL_FLOAT, 32, [3], strides=[-1], data=("host", 64)),
    "zero_strides": dl_input(KDL_INT, 64, [4, 4], strides=[0, 0]),
    "bool": dl_input(KDL_BOOL, 8, [3]),
    "f16_byte_offset": dl_input(KDL_FLOAT, 16, [2], byte_offset=6),
    "scalar": dl_input(KDL_FLOAT, 32, []),
    "empty": dl_input(KDL_FLOAT, 32, [0, 4], data=("null", 0)),
    "major_0": dl_input(KDL_FLOAT, 32, [2], major=0),
    "major_2_no_deleter": dl_input(KDL_FLOAT, 32, [2], major=2, deleter=False),
    "unknown_flag_bits": dl_input(KDL_FLOAT, 32, [2], flags=0xF0),
    "cuda_device": dl_input(KDL_FLOAT, 32, [2], device_type=2, device_id=0),
    "cuda_host_device": dl_input(KDL_FLOAT, 32, [2], device_type=3),
    "rocm_device": dl_input(KDL_FLOAT, 32, [2], device_type=10),
    "device_id_negative": dl_input(KDL_FLOAT, 32, [2], device_type=13, device_id=-1),
    "complex": dl_input(KDL_COMPLEX, 64, [2]),
    "lanes_4": dl_input(KDL_FLOAT, 32, [2], lanes=4),
    "lanes_0": dl_input(KDL_FLOAT, 32, [2], lanes=0),
    "bits_7": dl_input(KDL_INT, 7, [2]),
    "ndim_9": dl_input(KDL_FLOAT, 32, [1] * 9, nd=9),
    "ndim_negative": dl_input(KDL_FLOAT, 32, [], nd=-1),
    "null_shape": dl_input(KDL_FLOAT, 32, [2], null_shape=True),
    "null_data": dl_input(KDL_FLOAT, 32, [2], data=("null", 0)),
    "misaligned": dl_input(KDL_FLOAT, 32, [2], data=("host", 1)),
    "negative_dim": dl_input(KDL_FLOAT, 32, [3, -2]),
    "huge_stride": dl_input(KDL_FLOAT, 32, [2], strides=[2**62]),
    "stride_min": dl_input(KDL_FLOAT, 32, [3], strides=[INT64_MIN]),
    "wild_data_pointer": dl_input(KDL_FLOAT, 32, [2], data=("raw", 0x10)),
    "huge_byte_offset": dl_input(KDL_FLOAT, 32, [2], byte_offset=2**63),
}

MANIFEST_HEAD = """schema: 1
name: {name}
version: 0.1.0
plugin_abi: "1.0"
library: {library}
family: reference
device: cpu
priority: {priority}
"""

CPU_LIBRARY = "../plugins/libgpukit_cpu.so"


ADD_F32 = "ops:\n  - {name: add, dtypes: [f32]}\n"


def manifest(name="fuzz", library=CPU_LIBRARY, priority=5, ops=ADD_F32, extra=""):
    return MANIFEST_HEAD.format(name=name, library=library, priority=priority) + ops + extra


CUDA_MANIFEST = """schema: 1
name: matmul_fuzz
version: 1.2.0
plugin_abi: "1.0"
library: ../plugins/libgpukit_matmul_fuzz.so
family: matmul
device: cuda
sm: {sm}
priority: 100
ops:
  - {{name: matmul, dtypes: [bf16, f16]}}
"""

MANIFEST = {
    "cpu_plugin.yaml": manifest(ops="""ops:
  - {name: add,    dtypes: [f32, f64, f16, bf16, i8, i16, i32, i64, u8]}
  - {name: sum,    dtypes: [f32, f64, i32, i64]}
  - {name: matmul, dtypes: [f32, f64, f16, bf16]}
"""),
    "cpu_plugin_block_style.yaml": manifest(priority=-3, ops="""ops:
  - name: add
    dtypes:
      - f32
      - bf16
description: >
  folded text
  over two lines
"""),
    "cuda_sm_range.yaml": CUDA_MANIFEST.format(sm="{min: 80, max: 90}"),
    "cuda_sm_list.yaml": CUDA_MANIFEST.format(sm="[80, 86, 89]"),
    "cuda_sm_min_above_max.yaml": CUDA_MANIFEST.format(sm="{min: 90, max: 80}"),
    "cuda_sm_empty_list.yaml": CUDA_MANIFEST.format(sm="[]"),
    "cpu_with_sm.yaml": manifest(extra="sm: {min: 80, max: 90}\n"),
    "missing_library.yaml": manifest(library="../plugins/libgpukit_absent.so"),
    "absolute_library.yaml": manifest(library="/nonexistent/libgpukit_x.so"),
    "library_is_folder.yaml": manifest(library="../plugins"),
    "unknown_field.yaml": manifest(extra="colour: blue\n"),
    "unknown_op_field.yaml": manifest(ops="ops:\n  - {name: add, dtypes: [f32], tile: 128}\n"),
    "unknown_dtype.yaml": manifest(ops="ops:\n  - {name: add, dtypes: [bf17]}\n"),
    "unknown_op.yaml": manifest(ops="ops:\n  - {name: fft, dtypes: [f32]}\n"),
    "op_twice.yaml": manifest(ops=ADD_F32 + "  - {name: add, dtypes: [f64]}\n"),
    "empty_ops.yaml": manifest(ops="ops: []\n"),
    "ops_not_list.yaml": manifest(ops="ops: {add: f32}\n"),
    "priority_overflow.yaml": manifest(priority="99999999999999999999"),
    "priority_float.yaml": manifest(priority="1.5e3"),
    "priority_list.yaml": manifest(priority="[1, 2]"),
    "bad_name.yaml": manifest(name="Fuzz-Plugin"),
    "name_duplicates_cpu.yaml": manifest(name="cpu"),
    "plugin_abi_future.yaml": manifest().replace('"1.0"', '"9.0"'),
    "plugin_abi_garbage.yaml": manifest().replace('"1.0"', '"1.x"'),
    "schema_2.yaml": manifest().replace("schema: 1", "schema: 2"),
    "schema_missing.yaml": manifest().replace("schema: 1\n", ""),
    "anchors_and_aliases.yaml": manifest(
        ops="ops: &ops\n  - {name: add, dtypes: &d [f32]}\n  - {name: sum, dtypes: *d}\n",
        extra="description: *ops\n"),
    "tags.yaml": manifest(extra="description: !!binary aGVsbG8=\n").replace(
        "version: 0.1.0", "version: !custom 0.1.0"),
    "two_documents.yaml": manifest() + "---\n" + manifest(name="second"),
    "not_a_mapping.yaml": "- schema: 1\n- name: x\n",
    "scalar_only.yaml": "just text\n",
    "empty.yaml": "",
    "invalid_yaml.yaml": "schema: 1\nname: [unclosed\n",
    "flow_keys_not_scalars.yaml": "{[a, b]: 1, {c: d}: 2}\n",
    "deep_nesting.yaml": manifest(extra="description: " + "[" * 64 + "]" * 64 + "\n"),
}

# Known bugs at the time of writing (the corpora keep them fixed once fixed): duplicate keys
# and non-UTF-8 text in a manifest.
MANIFEST["duplicate_keys.yaml"] = manifest(priority="5\npriority: 7")
MANIFEST["non_utf8_dtype.yaml"] = manifest(ops="ops:\n  - {name: add, dtypes: [f\udcff32]}\n")
# Found by the fuzzers: yaml-cpp's LoadAll never ended on this text (it grew to gigabytes);
# ops over empty outputs walked 2^40 rows of nothing.
MANIFEST["loadall_never_ends.yaml"] = "- a: 1\n, name: x\n"
TENSOR_DESC["empty_output_many_rows"] = bytes.fromhex("0c000100010225000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000072000000fffc")
# matmul's inferred output of [n, k] @ [k, m] whose contiguous strides overflowed.
TENSOR_DESC["matmul_output_strides_overflow"] = bytes.fromhex("110002000102ffffffffff080010000000011001100608020600021000000001021010000601040100")
VIEW["empty_output_many_rows"] = bytes.fromhex("00010001100000010215000108000354020000006d")


# ---- weights: SafeTensors and GGUF files (fuzz_weights.cpp writes the input as one) ----

def safetensors(tensors, metadata=None):
    """tensors: (name, dtype string, shape, data bytes), laid out in order."""
    import json
    header, blobs, offset = {}, b"", 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs += data
        offset += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + blobs


def gguf_string(text):
    data = text.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(data)) + data


# GGUF value types and tensor types (ggml_type), by value.
GGUF_U32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 6, 7, 8, 9
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q8_0 = 0, 1, 2, 3, 8
GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_BF16 = 12, 13, 14, 30
BLOCK_BYTES = {GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20), GGML_Q8_0: (32, 34),
               GGML_Q4_K: (256, 144), GGML_Q5_K: (256, 176), GGML_Q6_K: (256, 210)}


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: (key, value type, encoded value); tensors: (name, dims innermost first, type)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, value in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + value
    offset, datas = 0, []
    for name, dims, ttype in tensors:
        count = 1
        for d in dims:
            count *= d
        if ttype in BLOCK_BYTES:
            block, nbytes = BLOCK_BYTES[ttype]
            size = count // block * nbytes
            # A plausible f16 scale (and min) at the start of each block, the rest a pattern.
            block_data = bytes([0x00, 0x3C, 0x00, 0x38]) + bytes(range(nbytes - 4))
            data = block_data * (count // block)
        else:
            item = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}[ttype]
            size = count * item
            data = bytes((i * 37) % 251 for i in range(size))
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, offset)
        datas.append(data)
        offset += (size + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for data in datas:
        out += data + b"\0" * (-len(data) % alignment)
    return out


F32_4 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
WEIGHTS = {
    "safetensors_f32.safetensors": safetensors([("w", "F32", [2, 2], F32_4)], {"format": "pt"}),
    "safetensors_mixed.safetensors": safetensors([
        ("a", "F16", [2], struct.pack("<2e", 1.0, -1.5)),
        ("b", "BF16", [1, 2], b"\x80\x3f\x00\xc0"),
        ("c", "I64", [1], struct.pack("<q", -7)),
        ("d", "BOOL", [3], b"\x01\x00\x01"),
        ("e", "U16", [1], b"\x01\x00"),
    ]),
    "safetensors_empty_tensor.safetensors": safetensors([("z", "F32", [0, 3], b"")], {}),
    "gguf_f32_and_metadata.gguf": gguf(
        [("general.architecture", GGUF_STRING, gguf_string("llama")),
         ("general.alignment", GGUF_U32, struct.pack("<I", 32)),
         ("llama.rope.freq_base", GGUF_F32, struct.pack("<f", 10000.0)),
         ("tokenizer.ggml.tokens", GGUF_ARRAY,
          struct.pack("<IQ", GGUF_STRING, 3) + gguf_string("a") + gguf_string("b") +
          gguf_string("\u00e9")),
         ("flag", GGUF_BOOL, b"\x01")],
        [("tok_embd.weight", [4, 2], GGML_F32), ("norm.weight", [4], GGML_F16)]),
    "gguf_v2_bf16.gguf": gguf([], [("x", [8], GGML_BF16)], version=2),
}
# An empty [0, 0] q8_0 tensor, which gk_copy_to_host called not contiguous.
WEIGHTS["gguf_empty_q8_0.gguf"] = bytes.fromhex("4747554603000000010000000000000000000000000000000a00000000000000626c6b2e302e71385f300200000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000002000000000000000020000000000000008000000000000000000000000000000000000000000000000000000000000000000003c0033000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d007e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e3c0038000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d0000000500000000000000000000000000000000000000000000000000")
# Empty, but the product of its other dimensions overflows: the readers counted it as 0
# elements and numel() overflowed when it became a tensor.
WEIGHTS["gguf_empty_overflowing_dims.gguf"] = gguf([], [("w", [2**40, 0, 2**40], GGML_F32)])
for ttype, name in [(GGML_Q4_0, "q4_0"), (GGML_Q4_1, "q4_1"), (GGML_Q8_0, "q8_0"),
                    (GGML_Q4_K, "q4_k"), (GGML_Q5_K, "q5_k"), (GGML_Q6_K, "q6_k")]:
    block = BLOCK_BYTES[ttype][0]
    WEIGHTS[f"gguf_{name}.gguf"] = gguf([], [(f"blk.0.{name}", [block, 2], ttype)])

# ---- tokenizer: a mode byte (bit 0 add special, bit 1 parse special, bit 2 skip special in
# decode), then text (fuzz_tokenizer.cpp) ----
TOKENIZER = {
    "plain": b"\x00the quick brown fox in the den",
    "specials": b"\x03<|bos|>hi <|eot|> there<tool>x",
    "emoji": "\x00a\U0001F600b\U0001F999 \u4f60\u597d".encode(),
    "numbers": b"\x00123 4567, 1,000,000.25",
    "whitespace": b"\x00  a \t\n\n  b\r\n   ",
    "invalid_utf8": b"\x04\xff\xe2\x82 \xf0\x9f\x98 \xc0\x80\xed\xa0\x80",
    "contractions": b"\x01I'M you're WE'LL it's",
}


# ---- tiktoken: a vocabulary file's text, 'BASE64 RANK' per line (fuzz_tiktoken.cpp) ----
def tiktoken_seeds():
    import base64

    def vocab(tokens):
        return "".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens))
    every_byte = [bytes([b]) for b in range(256)]
    merged = every_byte + [b"He", b"ll", b"llo", b"Hello", b" w", b" wor", b"12", b"123"]
    return {
        "every_byte": vocab(every_byte),
        "merges": vocab(merged),
        "crlf_and_padding_token": vocab(merged).replace("\n", "\r\n") + "= 264\n",
        "some_bytes": vocab([b"H", b"e", b"He", b"\xc3", b"\xa9"]),
        "rank_out_of_order": "SA== 0\nZQ== 5\n",
        "not_base64": "SA== 0\n!!!! 1\n",
        "three_fields": "SA== 0 x\n",
        "repeated_bytes": "SA== 0\nSA== 1\n",
        "huge_rank": "SA== 99999999999999999999\n",
    }


# ---- audio: a sound file's bytes (fuzz_audio.cpp). Encoded by the system libsndfile through
# tests/asr/make_speech.py, so only formats it writes are seeded; a WAV header is written by
# hand to claim far more frames than it holds. ----
def audio_seeds():
    import sys
    import tempfile

    import numpy as np

    sys.path.insert(0, str(HERE.parent / "asr"))
    import make_speech

    t = np.arange(160) / 8000.0
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    seeds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, samples, rate, fmt in (
                ("pcm16_mono_8k.wav", tone, 8000, "wav"),
                ("float_stereo_44k.wav", np.stack([tone, -tone], 1), 44100, "wav-float"),
                ("mono_16k.flac", tone, 16000, "flac"),
                ("mono_22k.ogg", np.tile(tone, 8), 22050, "ogg")):
            path = make_speech.write_sound(f"{tmp}/{name}", samples, rate, fmt)
            seeds[name] = pathlib.Path(path).read_bytes()
    pcm = (tone * 32767).astype("<i2").tobytes()
    fmt_chunk = struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, 1, 8000, 16000, 2, 16)
    seeds["claims_more_frames.wav"] = (b"RIFF" + struct.pack("<I", 0xFFFFFFF0) + b"WAVE" +
                                       fmt_chunk + b"data" + struct.pack("<I", 0xFFFFFF00) + pcm)
    return seeds


def write(target, seeds):
    folder = CORPUS / target
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in seeds.items():
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        (folder / name).write_bytes(data)
    print(f"{folder.relative_to(HERE.parent.parent)}: {len(seeds)} seeds")


def main():
    write("tensor_desc", TENSOR_DESC)
    write("view", VIEW)
    write("dlpack", DLPACK)
    write("manifest", MANIFEST)
    write("weights", WEIGHTS)
    write("tokenizer", TOKENIZER)
    write("tiktoken", tiktoken_seeds())
    write("audio", audio_seeds())


if __name__ == "__main__":
    main()
