"""matmul with a block-quantized weight (docs/ops.md, "matmul with a packed weight") on the
cpu device, against NumPy float64 on the weights as gguf-py dequantizes them: an independent
decoder, so the packed reads and the library's own dequantization are checked together."""
import numpy as np
import pytest

import gpukit

RNG_SEED = 20261129
QUANTS = ("Q8_0", "Q4_0", "Q4_1", "Q4_K")


def _gguf():
    return pytest.importorskip("gguf", reason="gguf-py (pip install gguf) writes the weights")


def _write(path, tensors):
    """A GGUF file holding the raw quantized tensors {name: (qtype, raw uint8 rows)}."""
    gguf = _gguf()
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (q, raw) in tensors.items():
        w.add_tensor(name, raw, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _random_raw(gguf, q, n, k, rng):
    """n rows of k elements as valid blocks: gguf-py's quantizer where it has one, else random
    bytes with finite f16 scales in [1e-3, 1e-1]."""
    try:
        return gguf.quants.quantize(rng.standard_normal((n, k)).astype(np.float32), q)
    except NotImplementedError:
        block, block_bytes = gguf.GGML_QUANT_SIZES[q]
        raw = rng.integers(0, 256, size=(n * k // block, block_bytes), dtype=np.uint8)
        for col in (0, 2):  # d and dmin
            raw[:, col:col + 2] = rng.uniform(1e-3, 1e-1, len(raw)).astype("<f2") \
                .view(np.uint8).reshape(-1, 2)
        return raw.reshape(n, -1)


@pytest.fixture(scope="module")
def quant_file(tmp_path_factory):
    gguf = _gguf()
    rng = np.random.default_rng(RNG_SEED)
    shapes = [(5, 256), (33, 512), (64, 1024)]
    tensors, expected = {}, {}
    for qname in QUANTS:
        q = getattr(gguf.GGMLQuantizationType, qname)
        for n, k in shapes:
            name = f"{qname.lower()}.{n}x{k}"
            raw = _random_raw(gguf, q, n, k, rng)
            tensors[name] = (q, raw)
            expected[name] = gguf.quants.dequantize(raw, q).astype(np.float64).reshape(n, k)
    path = tmp_path_factory.mktemp("quant") / "quant.gguf"
    _write(path, tensors)
    return str(path), expected


@pytest.mark.parametrize("qname", QUANTS)
@pytest.mark.parametrize("m", [1, 3, 17])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_matmul_matches_float64_on_gguf_py_dequantized(quant_file, qname, m, bias):
    path, expected = quant_file
    rng = np.random.default_rng(RNG_SEED + m)
    with gpukit.load_weights(path, device="cpu") as w:
        for name, ref_w in expected.items():
            if not name.startswith(qname.lower() + "."):
                continue
            n, k = ref_w.shape
            packed = w[name]
            assert packed.is_packed and packed.shape == (n, k)
            for dtype in ("f32", "bf16"):
                # multiples of 1/256 below 1: exact in f32 and bf16
                a = rng.integers(-255, 256, size=(m, k)).astype(np.float32) / 256
                b = rng.integers(-255, 256, size=n).astype(np.float32) / 256
                ga = gpukit.asarray(a, device="cpu").astype(dtype)
                inputs = [ga, packed] + ([gpukit.asarray(b, device="cpu").astype(dtype)]
                                         if bias else [])
                out = gpukit.call("matmul", inputs, {"transpose_b": 1}).to_numpy()
                assert out.dtype == np.float32 and out.shape == (m, n)
                ref = a.astype(np.float64) @ ref_w.T + (b if bias else 0)
                scale = np.abs(a.astype(np.float64)) @ np.abs(ref_w.T) + np.abs(b if bias else 0)
                np.testing.assert_array_less(np.abs(out - ref), 1e-6 * scale + 1e-30,
                                             err_msg=f"{name} {dtype} M={m}")


def test_packed_matmul_refuses_transpose_b_0_naming_it(quant_file):
    path, _ = quant_file
    with gpukit.load_weights(path, device="cpu") as w:
        a = gpukit.asarray(np.ones((1, 256), np.float32), device="cpu")
        with pytest.raises(gpukit.InvalidArgument, match="transpose_b = 1"):
            gpukit.call("matmul", [a, w["q8_0.5x256"]])
