"""A GGUF file of a Llama or Qwen2 shape with random weights, written with NumPy alone (the GPU
machine has no gguf package): the projections block-quantized (q8_0, q4_0, q4_1 or q4_k; valid
blocks, finite f16 scales), the token embedding f16, norms and biases f32. Used by
bench_decode.py --gguf; the layout follows the GGUF v3 spec (ggml/docs/gguf.md) and llama.cpp's
tensor names.
"""
from __future__ import annotations

import struct

import numpy as np

# ggml_type values and (elements, bytes) per block.
GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q4_1": (3, 32, 20),
        "q8_0": (8, 32, 34), "q4_k": (12, 256, 144)}
_ALIGN = 32
_U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64 = 4, 5, 6, 7, 8, 9, 10


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _value(v) -> bytes:
    if isinstance(v, bool):
        return struct.pack("<I?", _BOOL, v)
    if isinstance(v, int):
        return struct.pack("<IQ", _U64, v) if v >= 2**31 else struct.pack("<Ii", _I32, v)
    if isinstance(v, float):
        return struct.pack("<If", _F32, v)
    if isinstance(v, str):
        return struct.pack("<I", _STRING) + _string(v)
    raise TypeError(f"GGUF value {v!r}")


def random_blocks(dtype: str, rows: int, cols: int, rng) -> np.ndarray:
    """rows x cols elements of `dtype` as uint8 rows of packed blocks: random quants, f16
    scales in [1e-4, 1e-3] (weights of order 0.1 at most, as a trained model's)."""
    _, block, block_bytes = GGML[dtype]
    blocks = rows * cols // block
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    scales = 2 if dtype in ("q4_1", "q4_k") else 1
    for i in range(scales):
        raw[:, 2 * i:2 * i + 2] = rng.uniform(1e-4, 1e-3, blocks).astype("<f2") \
            .view(np.uint8).reshape(blocks, 2)
    return raw.reshape(rows, -1)


def write(path: str, metadata: dict, tensors: list) -> None:
    """tensors: (name, dtype name, shape row-major innermost last, ndarray of its bytes)."""
    infos, offset = [], 0
    for name, dtype, shape, data in tensors:
        infos.append(_string(name) + struct.pack("<I", len(shape)) +
                     b"".join(struct.pack("<Q", d) for d in reversed(shape)) +
                     struct.pack("<IQ", GGML[dtype][0], offset))
        offset += (data.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
        for k, v in metadata.items():
            f.write(_string(k) + _value(v))
        for info in infos:
            f.write(info)
        f.write(b"\0" * (-f.tell() % _ALIGN))
        for _, _, _, data in tensors:
            f.write(np.ascontiguousarray(data).tobytes())
            f.write(b"\0" * (-data.nbytes % _ALIGN))


def write_model(path: str, cfg: dict, quant: str, seed: int = 30) -> int:
    """A llama.cpp-style file for a transformers config dict (bench_decode.SHAPES): llama
    for LlamaForCausalLM, qwen2 (with q/k/v biases) for Qwen2ForCausalLM; tied embeddings.
    Llama 3's rope scaling is left out (speed does not depend on it). Returns the bytes a
    decode step reads of the weights: every projection as stored, plus the tied head in bf16
    (the token embedding is dequantized to the model's dtype at load)."""
    rng = np.random.default_rng(seed)
    arch = "qwen2" if cfg["cls"] == "Qwen2ForCausalLM" else "llama"
    hidden, ffn, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or hidden // heads
    vocab = cfg["vocab_size"]
    meta = {"general.architecture": arch, "general.name": f"random {arch} {quant}",
            f"{arch}.block_count": layers, f"{arch}.context_length": 4096,
            f"{arch}.embedding_length": hidden, f"{arch}.feed_forward_length": ffn,
            f"{arch}.attention.head_count": heads, f"{arch}.attention.head_count_kv": kv_heads,
            f"{arch}.attention.key_length": head_dim, f"{arch}.attention.value_length": head_dim,
            f"{arch}.attention.layer_norm_rms_epsilon": float(cfg["rms_norm_eps"]),
            f"{arch}.rope.freq_base": float(cfg["rope_theta"]), f"{arch}.vocab_size": vocab}
    f32 = lambda *shape: ("f32", shape, rng.uniform(0.5, 1.5, shape).astype(np.float32))
    tensors = [("token_embd.weight", "f16", (vocab, hidden),
                (rng.standard_normal((vocab, hidden)) * 0.02).astype(np.float16)),
               ("output_norm.weight",) + f32(hidden)]
    read = vocab * hidden * 2  # the tied head, bf16
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    for i in range(layers):
        p = f"blk.{i}."
        tensors.append((p + "attn_norm.weight",) + f32(hidden))
        tensors.append((p + "ffn_norm.weight",) + f32(hidden))
        for name, rows, cols in (("attn_q", q_dim, hidden), ("attn_k", kv_dim, hidden),
                                 ("attn_v", kv_dim, hidden), ("attn_output", hidden, q_dim),
                                 ("ffn_gate", ffn, hidden), ("ffn_up", ffn, hidden),
                                 ("ffn_down", hidden, ffn)):
            # As llama.cpp falls back where K is no multiple of the super-block (Qwen2.5's
            # 896): q8_0 there.
            q = quant if cols % GGML[quant][1] == 0 else "q8_0"
            data = random_blocks(q, rows, cols, rng)
            tensors.append((p + name + ".weight", q, (rows, cols), data))
            read += data.nbytes
        if arch == "qwen2":
            for name, n in (("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim)):
                tensors.append((p + name + ".bias", "f32", (n,),
                                (rng.standard_normal(n) * 0.02).astype(np.float32)))
    write(path, meta, tensors)
    return read
