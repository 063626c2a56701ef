"""Writes a golden model of tests/llm/golden as a GGUF file the way llama.cpp's
convert_hf_to_gguf.py does, for the tests that load both and compare.

    python3 tests/llm/gguf_models.py llama3 /tmp/llama3.gguf

Covered: the Llama family (LlamaModel: llama.cpp's tensor names, q/k rows permuted for its
interleaved rope, Llama 3 rope scaling as the tensor rope_freqs.weight) and GPT-2
(GPT2Model: Conv1D weights transposed to [out, in], q/k/v fused in attn_qkv, output.weight
a copy of token_embd). Weights stay float32, so both files hold the same numbers.
Needs numpy, safetensors and the gguf package (llama.cpp's gguf-py).
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def _config(name):
    with open(os.path.join(GOLDEN_DIR, name, "config.json")) as f:
        return json.load(f)


def _rope(cfg):
    """(theta, scaling dict or None) from either config style (see reference_forward)."""
    params = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    theta = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    return theta, (params if kind == "llama3" else None)


def llama3_rope_freqs(theta, head_dim, p):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: per frequency, the divisor
    llama.cpp applies to theta_base^(-2i/d). (The converter reads
    original_max_position_embeddings from the top level of config.json, where transformers
    does not put it, so it falls back to 8192; here it is read from the rope parameters, as
    HF uses it, so that the file describes the same model.)"""
    freqs = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor = p.get("factor", 8.0)
    low = p.get("low_freq_factor", 1.0)
    high = p.get("high_freq_factor", 4.0)
    old_ctx = p.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def _permute(x, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF's half-split rope rows to llama.cpp's
    interleaved pairs."""
    return x.reshape(n_head, 2, x.shape[0] // n_head // 2, *x.shape[1:]).swapaxes(1, 2).reshape(
        x.shape)


LLAMA_TOP = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
LLAMA_LAYER = {"input_layernorm.weight": "attn_norm.weight",
               "self_attn.q_proj.weight": "attn_q.weight",
               "self_attn.k_proj.weight": "attn_k.weight",
               "self_attn.v_proj.weight": "attn_v.weight",
               "self_attn.q_proj.bias": "attn_q.bias",
               "self_attn.k_proj.bias": "attn_k.bias",
               "self_attn.v_proj.bias": "attn_v.bias",
               "self_attn.q_norm.weight": "attn_q_norm.weight",
               "self_attn.k_norm.weight": "attn_k_norm.weight",
               "self_attn.o_proj.weight": "attn_output.weight",
               "post_attention_layernorm.weight": "ffn_norm.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
               "mlp.down_proj.weight": "ffn_down.weight"}


def write_llama(name, path, rope_freqs=True):
    """A LlamaForCausalLM golden model as llama.cpp's "llama" GGUF. rope_freqs=False leaves
    out the Llama 3 scaling tensor (the file then describes a model without it)."""
    import gguf
    cfg = _config(name)
    assert cfg["architectures"][0] == "LlamaForCausalLM", name
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    theta, scaling = _rope(cfg)
    out = gguf.GGUFWriter(str(path), "llama")
    out.add_block_count(cfg["num_hidden_layers"])
    out.add_context_length(cfg["max_position_embeddings"])
    out.add_embedding_length(cfg["hidden_size"])
    out.add_feed_forward_length(cfg["intermediate_size"])
    out.add_head_count(heads)
    out.add_head_count_kv(kv_heads)
    out.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    out.add_rope_freq_base(theta)
    out.add_vocab_size(cfg["vocab_size"])
    if scaling is not None and rope_freqs:
        out.add_tensor("rope_freqs.weight", llama3_rope_freqs(theta, head_dim, scaling))
    for key, value in sorted(load_file(os.path.join(GOLDEN_DIR, name, "model.safetensors")).items()):
        value = value.astype(np.float32)
        if key in LLAMA_TOP:
            out.add_tensor(LLAMA_TOP[key], np.ascontiguousarray(value))
            continue
        parts = key.split(".")
        role = ".".join(parts[3:])
        if role == "self_attn.q_proj.weight":
            value = _permute(value, heads)
        elif role == "self_attn.k_proj.weight":
            value = _permute(value, kv_heads)
        out.add_tensor(f"blk.{parts[2]}.{LLAMA_LAYER[role]}", np.ascontiguousarray(value))
    _finish(out)


GPT2_TOP = {"transformer.wte.weight": "token_embd.weight",
            "transformer.wpe.weight": "position_embd.weight",
            "transformer.ln_f.weight": "output_norm.weight",
            "transformer.ln_f.bias": "output_norm.bias"}
GPT2_LAYER = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
              "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
               "mlp.c_proj.weight")


def write_gpt2(name, path):
    """A GPT2LMHeadModel golden model as llama.cpp's "gpt2" GGUF (GPT2Model's conversion)."""
    import gguf
    cfg = _config(name)
    assert cfg["architectures"][0] == "GPT2LMHeadModel", name
    out = gguf.GGUFWriter(str(path), "gpt2")
    out.add_block_count(cfg["n_layer"])
    out.add_context_length(cfg["n_positions"])
    out.add_embedding_length(cfg["n_embd"])
    out.add_feed_forward_length(cfg.get("n_inner") or 4 * cfg["n_embd"])
    out.add_head_count(cfg["n_head"])
    out.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    out.add_vocab_size(cfg["vocab_size"])
    for key, value in sorted(load_file(os.path.join(GOLDEN_DIR, name, "model.safetensors")).items()):
        value = value.astype(np.float32)
        if key.endswith((".attn.bias", ".attn.masked_bias")):
            continue  # causal-mask buffers, which the converter drops
        if key in GPT2_TOP:
            out.add_tensor(GPT2_TOP[key], np.ascontiguousarray(value))
            if key == "transformer.wte.weight":  # the converter writes the tied head too
                out.add_tensor("output.weight", np.ascontiguousarray(value))
            continue
        parts = key.split(".")  # transformer.h.N.<module>.<weight|bias>
        module, kind = ".".join(parts[3:-1]), parts[-1]
        if ".".join(parts[3:]) in GPT2_CONV1D:
            value = value.T
        out.add_tensor(f"blk.{parts[2]}.{GPT2_LAYER[module]}.{kind}", np.ascontiguousarray(value))
    _finish(out)


def _finish(out):
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()


def write(name, path):
    if _config(name)["architectures"][0] == "GPT2LMHeadModel":
        write_gpt2(name, path)
    else:
        write_llama(name, path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import golden_weights  # beside this file: writes the models' weights from weights.json

    golden_weights.ensure([sys.argv[1]])
    write(sys.argv[1], sys.argv[2])
