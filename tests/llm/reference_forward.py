#!/usr/bin/env python3
"""A NumPy float64 forward pass for the llm architectures, written to be read.

It loads an HF model folder (config.json + model.safetensors) and runs a prefill and a
greedy decode loop with a KV cache, exactly as HF transformers computes it (eager
attention), but without torch. Two uses:

  * It proves the golden files under tests/llm/golden/ (test_reference_forward.py): an
    independent implementation reproduces HF's logits to 1e-4 relative and its tokens.
  * It is the specification the C++ model runner follows: each architecture's forward is
    spelled out below, one plain function per step.

Architectures: LlamaForCausalLM (Llama 2, Llama 3 rope scaling, SmolLM2 tied embeddings),
MistralForCausalLM, Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (q/k norm, explicit
head_dim), GPT2LMHeadModel (learned positions, LayerNorm, gelu_new, Conv1D weights).

    python3 tests/llm/reference_forward.py            # check every golden folder
    python3 tests/llm/reference_forward.py llama gpt2
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")

LLAMA_FAMILY = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
GPT2_FAMILY = ("GPT2LMHeadModel",)


# ---------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    """HF LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight, over the last axis.
    No mean subtraction and no bias; eps is inside the square root."""
    var = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(var + eps) * weight


def layer_norm(x, weight, bias, eps):
    """torch.nn.LayerNorm: biased variance (divide by n, not n-1), eps inside the root."""
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_new(x):
    """GPT-2's gelu: the tanh approximation (HF "gelu_new", PyTorch gelu(approximate='tanh'))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def linear(x, weight, bias=None):
    """nn.Linear: weight is stored [out, in], so y = x @ W^T (+ b)."""
    y = x @ weight.T
    return y if bias is None else y + bias


def conv1d(x, weight, bias):
    """GPT-2's Conv1D: weight is stored [in, out] (transposed against nn.Linear), y = x @ W + b."""
    return x @ weight + bias


def softmax(x):
    x = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------------
# Rotary position embedding (HF layout)
# ---------------------------------------------------------------------------------------

def rope_parameters(cfg):
    """theta and scaling from either config style: transformers >= 5 writes
    "rope_parameters": {"rope_type", "rope_theta", ...}; older configs (most published
    models) write "rope_theta" and an optional "rope_scaling" whose type key is "rope_type"
    or, older still, "type"."""
    if "rope_parameters" in cfg and cfg["rope_parameters"]:
        params = dict(cfg["rope_parameters"])
    else:
        params = dict(cfg.get("rope_scaling") or {})
        params.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    return rope_type, params


def rope_inv_freq(cfg, head_dim):
    """inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, then the architecture's scaling."""
    rope_type, p = rope_parameters(cfg)
    theta = float(p["rope_theta"])
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if rope_type == "default":
        return inv_freq
    if rope_type == "llama3":
        return llama3_scale(inv_freq, p)
    raise NotImplementedError(f"rope_type {rope_type!r}")


def llama3_scale(inv_freq, p):
    """Llama 3.1 frequency scaling (HF _compute_llama3_parameters). Wavelengths shorter
    than original_max/high_freq_factor are kept, longer than original_max/low_freq_factor
    are divided by factor, and the band between is interpolated linearly in
    original_max/wavelength. Positions are not rescaled and there is no attention factor."""
    factor = float(p["factor"])
    low = float(p["low_freq_factor"])
    high = float(p["high_freq_factor"])
    old_ctx = float(p["original_max_position_embeddings"])
    wavelen = 2.0 * math.pi / inv_freq
    out = np.where(wavelen > old_ctx / low, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1.0 - smooth) * out / factor + smooth * out
    medium = (wavelen >= old_ctx / high) & (wavelen <= old_ctx / low)
    return np.where(medium, smoothed, out)


def apply_rope(x, positions, inv_freq):
    """HF rotate_half layout: dimension i pairs with i + head_dim/2 (not 2i with 2i+1 as
    in the GGUF / llama.cpp layout, which is why GGUF q/k weights come permuted).
    x: [heads, T, head_dim]; positions: [T]."""
    angles = np.outer(positions, inv_freq)                  # [T, head_dim/2]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)    # [T, head_dim]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


# ---------------------------------------------------------------------------------------
# Attention with a KV cache
# ---------------------------------------------------------------------------------------

class KVCache:
    """Per layer, keys and values of every position seen so far: [kv_heads, T, head_dim].
    Keys are stored after rotary (and after k_norm for Qwen3), so a decode step never
    touches earlier positions again."""

    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers

    def length(self):
        return 0 if self.k[0] is None else self.k[0].shape[1]

    def append(self, layer, k, v):
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = np.concatenate([self.k[layer], k], axis=1)
            self.v[layer] = np.concatenate([self.v[layer], v], axis=1)
        return self.k[layer], self.v[layer]


def attention(q, k, v, start):
    """Causal scaled dot-product attention with grouped-query heads.
    q: [heads, T, d] for positions start..start+T-1; k, v: [kv_heads, start+T, d].
    Query head h reads kv head h // (heads / kv_heads) (HF repeat_kv: each kv head is
    repeated for a contiguous group of query heads)."""
    heads, t, d = q.shape
    group = heads // k.shape[0]
    k = np.repeat(k, group, axis=0)
    v = np.repeat(v, group, axis=0)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)        # [heads, T, start+T]
    q_pos = start + np.arange(t)[:, None]
    k_pos = np.arange(k.shape[1])[None, :]
    scores = np.where(k_pos <= q_pos, scores, -np.inf)
    return softmax(scores) @ v                              # [heads, T, d]


def split_heads(x, n, d):
    """[T, n*d] -> [n, T, d]."""
    return x.reshape(x.shape[0], n, d).transpose(1, 0, 2)


def merge_heads(x):
    """[n, T, d] -> [T, n*d]."""
    return x.transpose(1, 0, 2).reshape(x.shape[1], -1)


# ---------------------------------------------------------------------------------------
# Llama family: Llama 2/3, SmolLM2, Mistral, Qwen2, Qwen3
# ---------------------------------------------------------------------------------------

class LlamaFamily:
    """Pre-norm decoder: x += attn(rms_norm(x)); x += mlp(rms_norm(x)); logits =
    lm_head(rms_norm(x)). The members differ only in:
      Qwen2   q/k/v projections carry a bias (o_proj does not);
      Qwen3   RMSNorm over each head's q and k (q_norm/k_norm, weight [head_dim]) after the
              projection and before rotary; head_dim is explicit and may differ from
              hidden/heads;
      Llama3  rope_type llama3 frequency scaling;
      tied    no lm_head.weight in the file: logits use embed_tokens.weight;
      Mistral sliding-window attention (window here is null or longer than any sequence).
    """

    def __init__(self, cfg, w):
        self.cfg = cfg
        self.w = w
        self.n_layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg.get("head_dim") or cfg["hidden_size"] // self.heads
        self.eps = cfg["rms_norm_eps"]
        self.inv_freq = rope_inv_freq(cfg, self.head_dim)
        # Tied embeddings are decided by the file, which is what a loader can trust; the
        # config flag must agree.
        self.lm_head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        assert ("lm_head.weight" not in w) == bool(cfg.get("tie_word_embeddings", False))
        act = cfg.get("hidden_act", "silu")
        assert act == "silu", f"hidden_act {act}"
        window = cfg.get("sliding_window")
        self.window = window if cfg.get("use_sliding_window", True) else None

    def forward(self, tokens, cache):
        """tokens: [T] ids at positions cache.length() ... ; returns logits [T, vocab]."""
        w, p = self.w, "model.layers."
        start = cache.length()
        positions = np.arange(start, start + len(tokens), dtype=np.float64)
        if self.window is not None:
            # Not implemented: the golden sequences are shorter than any window used.
            assert start + len(tokens) <= self.window, "sliding window not implemented"
        x = w["model.embed_tokens.weight"][tokens]
        for i in range(self.n_layers):
            a = f"{p}{i}.self_attn."
            h = rms_norm(x, w[f"{p}{i}.input_layernorm.weight"], self.eps)
            q = linear(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias"))
            k = linear(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias"))
            v = linear(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias"))
            q = split_heads(q, self.heads, self.head_dim)
            k = split_heads(k, self.kv_heads, self.head_dim)
            v = split_heads(v, self.kv_heads, self.head_dim)
            if a + "q_norm.weight" in w:  # Qwen3
                q = rms_norm(q, w[a + "q_norm.weight"], self.eps)
                k = rms_norm(k, w[a + "k_norm.weight"], self.eps)
            q = apply_rope(q, positions, self.inv_freq)
            k = apply_rope(k, positions, self.inv_freq)
            k_all, v_all = cache.append(i, k, v)
            o = merge_heads(attention(q, k_all, v_all, start))
            x = x + linear(o, w[a + "o_proj.weight"], w.get(a + "o_proj.bias"))

            m = f"{p}{i}.mlp."
            h = rms_norm(x, w[f"{p}{i}.post_attention_layernorm.weight"], self.eps)
            gate = silu(linear(h, w[m + "gate_proj.weight"]))
            up = linear(h, w[m + "up_proj.weight"])
            x = x + linear(gate * up, w[m + "down_proj.weight"])
        x = rms_norm(x, w["model.norm.weight"], self.eps)
        return linear(x, self.lm_head)


# ---------------------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------------------

class GPT2:
    """Pre-LayerNorm decoder with learned absolute positions (wpe) and no rotary.
    All projections are Conv1D ([in, out] weights) with biases; c_attn yields q, k, v
    concatenated along the output axis in that order; the MLP is c_fc -> gelu_new ->
    c_proj; the LM head is always tied to wte (the file has no lm_head.weight)."""

    def __init__(self, cfg, w):
        self.cfg = cfg
        self.w = w
        self.n_layers = cfg["n_layer"]
        self.heads = cfg["n_head"]
        self.hidden = cfg["n_embd"]
        self.head_dim = self.hidden // self.heads
        self.eps = cfg["layer_norm_epsilon"]
        act = cfg.get("activation_function", "gelu_new")
        assert act == "gelu_new", f"activation_function {act}"
        # Both flags change the attention scale; neither is set by any GPT-2 checkpoint.
        assert cfg.get("scale_attn_weights", True)
        assert not cfg.get("scale_attn_by_inverse_layer_idx", False)

    def forward(self, tokens, cache):
        w, p = self.w, "transformer.h."
        start = cache.length()
        positions = np.arange(start, start + len(tokens))
        x = w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][positions]
        for i in range(self.n_layers):
            a = f"{p}{i}.attn."
            h = layer_norm(x, w[f"{p}{i}.ln_1.weight"], w[f"{p}{i}.ln_1.bias"], self.eps)
            qkv = conv1d(h, w[a + "c_attn.weight"], w[a + "c_attn.bias"])
            q, k, v = np.split(qkv, 3, axis=-1)
            q = split_heads(q, self.heads, self.head_dim)
            k = split_heads(k, self.heads, self.head_dim)
            v = split_heads(v, self.heads, self.head_dim)
            k_all, v_all = cache.append(i, k, v)
            o = merge_heads(attention(q, k_all, v_all, start))
            x = x + conv1d(o, w[a + "c_proj.weight"], w[a + "c_proj.bias"])

            m = f"{p}{i}.mlp."
            h = layer_norm(x, w[f"{p}{i}.ln_2.weight"], w[f"{p}{i}.ln_2.bias"], self.eps)
            h = gelu_new(conv1d(h, w[m + "c_fc.weight"], w[m + "c_fc.bias"]))
            x = x + conv1d(h, w[m + "c_proj.weight"], w[m + "c_proj.bias"])
        x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], self.eps)
        return x @ w["transformer.wte.weight"].T


# ---------------------------------------------------------------------------------------
# Loading and generation
# ---------------------------------------------------------------------------------------

def load_model(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
    arch = cfg["architectures"][0]
    if arch in LLAMA_FAMILY:
        return LlamaFamily(cfg, w)
    if arch in GPT2_FAMILY:
        return GPT2(cfg, w)
    raise NotImplementedError(f"architecture {arch}")


def generate_greedy(model, prompt, steps):
    """Prefill the prompt, then `steps` decode steps of one token each through the cache.
    Returns (prefill_logits [T, vocab], tokens [steps], decode_logits [steps, vocab]) with
    the golden files' convention: tokens[0] is the argmax of the last prefill row, and
    decode step i feeds tokens[i] and returns decode_logits[i]."""
    cache = KVCache(model.n_layers)
    prefill = model.forward(np.asarray(prompt, dtype=np.int64), cache)
    row = prefill[-1]
    tokens, logits = [], []
    for _ in range(steps):
        tok = int(np.argmax(row))
        tokens.append(tok)
        row = model.forward(np.array([tok]), cache)[-1]
        logits.append(row)
    return prefill, np.array(tokens, dtype=np.int64), np.stack(logits)


def row_rel_err(ours, ref):
    """Per row max |ours - ref| / max |ref|: the llm tests' f32/bf16 tolerance metric."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return np.max(np.abs(ours - ref), axis=-1) / np.max(np.abs(ref), axis=-1)


def check_golden(name, tol=1e-4):
    """Run the reference on a golden folder; return the worst row error and raise if a
    row exceeds tol or a greedy token differs."""
    folder = os.path.join(GOLDEN_DIR, name)
    model = load_model(folder)
    golden = load_file(os.path.join(folder, "golden.safetensors"))
    worst = 0.0
    for sfx in ("", "_b"):
        steps = len(golden["decode_tokens" + sfx])
        prefill, tokens, logits = generate_greedy(model, golden["prompt" + sfx], steps)
        for what, ours, ref in (("prefill", prefill, golden["prefill_logits" + sfx]),
                                ("decode", logits, golden["decode_logits" + sfx])):
            err = row_rel_err(ours, ref)
            bad = np.nonzero(err > tol)[0]
            if len(bad):
                raise AssertionError(f"{name}{sfx} {what} row {bad[0]}: rel err {err[bad[0]]:.2e}")
            worst = max(worst, float(err.max()))
        if not np.array_equal(tokens, golden["decode_tokens" + sfx]):
            i = int(np.nonzero(tokens != golden["decode_tokens" + sfx])[0][0])
            raise AssertionError(f"{name}{sfx}: token {i} is {tokens[i]}, golden "
                                 f"{golden['decode_tokens' + sfx][i]}")
    return worst


def golden_names():
    return sorted(d for d in os.listdir(GOLDEN_DIR)
                  if os.path.isfile(os.path.join(GOLDEN_DIR, d, "golden.safetensors")))


def main(argv):
    import golden_weights  # beside this file: writes the models' weights from weights.json

    names = argv or golden_names()
    golden_weights.ensure(names)
    for name in names:
        print(f"{name}: max row relative error {check_golden(name):.2e}, tokens identical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
