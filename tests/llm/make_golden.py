#!/usr/bin/env python3
"""Regenerate the llm golden files: tiny random-weight HF transformers models and their
expected logits and greedy tokens.

    python3 tests/llm/make_golden.py            # rewrite tests/llm/golden/<name>/
    python3 tests/llm/make_golden.py --check    # reload the saved models, confirm the goldens

Needs torch, transformers and safetensors (the versions used are in golden/README.md).
CI does not run this script (PyPI's torch is too heavy); it compares against its output.

Every model is built from a config, its weights are re-initialised from a fixed-seed
NumPy normal (golden_weights.py), and attention is the eager implementation, so that the
output is deterministic and any loader can reproduce it from config.json + model.safetensors
alone. The weights are not stored: each folder keeps weights.json (seed, scales, tensor
names and shapes) and golden_weights.py writes model.safetensors from it, bit for bit the
weights the goldens were computed with (write() checks it against what save_pretrained
saved).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file, save_file
from transformers import (AutoModelForCausalLM, GPT2Config, LlamaConfig, MistralConfig,
                          Qwen2Config, Qwen3Config)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_weights  # noqa: E402

GOLDEN_DIR = golden_weights.GOLDEN_DIR

VOCAB = 320
MAX_POS = 256
DECODE_STEPS = 32
# Std of the re-initialised weights: large enough that logits are far from flat and
# greedy top-2 margins are rarely near-ties; small enough that nothing saturates.
WEIGHT_STD = 0.15
NORM_NOISE = 0.1  # norm weights are 1 + N(0, NORM_NOISE)
# Smallest top-2 margin accepted at a greedy step. The f32 tolerance (relative 1e-4 of a
# row's max |logit|, about 5 here) lets two logits move by ~1e-3 together; 5x that keeps
# every golden step decisive in f32, so f32 greedy tokens must match at all 32 steps.
# A seed whose model has a closer call is skipped (the next seed is seed + SEED_STRIDE).
MIN_MARGIN = 5e-3
# A random model easily falls into repeating one token; a golden whose greedy tokens are
# all alike would not test the decode path's positions. Fewer distinct tokens than this in
# either sequence also moves on to the next seed.
MIN_DISTINCT = 8
# The greedy tokens must not hold the end-of-sequence id: generate() (cross_check, which
# asks for min_new_tokens) and a runner asked for 32 tokens would stop or steer away there.
# Such a seed moves on too.
SEED_STRIDE = 1000
SEED_TRIES = 20

# Two prompts of different lengths for the batching tests. Both use the first and last
# vocab ids so an off-by-one in the embedding lookup cannot hide.
PROMPT_A = [1, 17, 203, 319, 0, 58, 111, 242, 9, 300, 77]
PROMPT_B = [1, 250, 3, 319, 128, 64, 5]

LLAMA_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=MAX_POS,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    bos_token_id=1,
    eos_token_id=2,
)


def make_configs():
    """name -> (seed, config). Each entry differs from plain Llama in what its
    architecture adds, so that a loader that ignores the difference fails its test."""
    return {
        "llama": (
            1001,
            LlamaConfig(**LLAMA_COMMON, rope_theta=10000.0, tie_word_embeddings=False),
        ),
        "llama3": (
            1002,
            LlamaConfig(
                **LLAMA_COMMON,
                tie_word_embeddings=False,
                rope_theta=500000.0,
                # original_max_position_embeddings is small so that, at head_dim 16, some
                # frequencies fall in each of the three llama3 bands (kept, smoothed, /factor).
                rope_scaling={
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 64,
                },
            ),
        ),
        "mistral": (
            1003,
            MistralConfig(
                **{**LLAMA_COMMON, "rms_norm_eps": 1e-5},
                rope_theta=10000.0,
                sliding_window=None,
                tie_word_embeddings=False,
            ),
        ),
        "qwen2": (
            1004,
            Qwen2Config(
                **LLAMA_COMMON,
                rope_theta=1000000.0,
                use_sliding_window=False,
                tie_word_embeddings=False,
            ),
        ),
        "qwen3": (
            1005,
            # head_dim 32 != hidden/heads (16), as in the real Qwen3 models, so a loader that
            # derives head_dim from hidden_size fails. Tied embeddings, as Qwen3-0.6B.
            Qwen3Config(
                **{**LLAMA_COMMON, "head_dim": 32},
                rope_theta=1000000.0,
                use_sliding_window=False,
                attention_bias=False,
                tie_word_embeddings=True,
            ),
        ),
        "smollm2": (
            1006,
            LlamaConfig(
                **{**LLAMA_COMMON, "num_hidden_layers": 3},
                rope_theta=100000.0,
                tie_word_embeddings=True,
            ),
        ),
        "gpt2": (
            1007,
            GPT2Config(
                vocab_size=VOCAB,
                n_positions=MAX_POS,
                n_embd=64,
                n_layer=2,
                n_head=4,
                n_inner=128,
                activation_function="gelu_new",
                layer_norm_epsilon=1e-5,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                bos_token_id=1,
                eos_token_id=2,
                tie_word_embeddings=True,
            ),
        ),
    }


def weight_spec(model, seed):
    """What weights.json holds: enough for golden_weights.py to make every parameter.
    Biases (qwen2 q/k/v, all of gpt2) get the matrices' std: non-zero on purpose."""
    return {"seed": seed, "weight_std": WEIGHT_STD, "norm_noise": NORM_NOISE,
            "tensors": [[name, list(p.shape)] for name, p in sorted(model.named_parameters())]}


def build(name, seed, config):
    """The model with every parameter overwritten by golden_weights' values; and its
    weight spec."""
    model = AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", dtype=torch.float32
    )
    model.eval()
    spec = weight_spec(model, seed)
    weights = golden_weights.make_weights(spec)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[pname]))
    return model, spec


def margin(logits_row):
    top2 = np.sort(logits_row)[-2:]
    return float(top2[1] - top2[0])


@torch.no_grad()
def run_prompt(model, prompt):
    """Prefill, then DECODE_STEPS single-token steps through the KV cache.

    decode_tokens[i] is the i-th generated token (decode_tokens[0] = argmax of the last
    prefill row), and decode step i feeds decode_tokens[i] at position len(prompt)+i and
    returns decode_logits[i], so argmax(decode_logits[i]) == decode_tokens[i+1].
    decode_margin[i] is the top-2 margin of the row that chose decode_tokens[i].
    """
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model(input_ids=ids, use_cache=True)
    prefill = out.logits[0].float().numpy().copy()
    past = out.past_key_values
    row = prefill[-1]
    tokens, logits, margins = [], [], []
    for _ in range(DECODE_STEPS):
        tok = int(np.argmax(row))
        tokens.append(tok)
        margins.append(margin(row))
        out = model(
            input_ids=torch.tensor([[tok]], dtype=torch.long),
            past_key_values=past,
            use_cache=True,
        )
        past = out.past_key_values
        row = out.logits[0, -1].float().numpy().copy()
        logits.append(row)
    return {
        "prompt": np.array(prompt, dtype=np.int32),
        "prefill_logits": prefill.astype(np.float32),
        "decode_tokens": np.array(tokens, dtype=np.int32),
        "decode_logits": np.stack(logits).astype(np.float32),
        "decode_margin": np.array(margins, dtype=np.float32),
    }


def rel_err(a, b):
    """Per-row max |a-b| / max |b|: the metric the llm tests use."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.max(np.abs(a - b), axis=-1) / np.max(np.abs(b), axis=-1)))


@torch.no_grad()
def cross_check(model, g):
    """The cached decode loop must agree with one uncached pass over prompt + tokens,
    and with transformers' own greedy generate()."""
    prompt = g["prompt"].tolist()
    full = prompt + g["decode_tokens"].tolist()
    logits = model(input_ids=torch.tensor([full]), use_cache=False).logits[0].numpy()
    t = len(prompt)
    e_prefill = rel_err(logits[:t], g["prefill_logits"])
    e_decode = rel_err(logits[t:], g["decode_logits"])
    gen = model.generate(
        torch.tensor([prompt]),
        attention_mask=torch.ones(1, t, dtype=torch.long),
        max_new_tokens=DECODE_STEPS,
        min_new_tokens=DECODE_STEPS,
        do_sample=False,
        pad_token_id=0,
    )[0, t:].tolist()
    return e_prefill, e_decode, gen == g["decode_tokens"].tolist()


def check_rope_llama3(model):
    """The llama3 scaling must actually change frequencies at this head_dim."""
    cfg = model.config
    rotary = model.model.rotary_emb
    scaled = rotary.inv_freq.double().numpy()
    dim = cfg.head_dim
    theta = cfg.rope_parameters["rope_theta"]
    plain = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    ratio = plain / scaled
    changed = int(np.sum(~np.isclose(ratio, 1.0)))
    return plain, scaled, ratio, changed


def write(name, base_seed, config):
    for attempt in range(SEED_TRIES):
        seed = base_seed + SEED_STRIDE * attempt
        model, spec = build(name, seed, config)
        ga = run_prompt(model, PROMPT_A)
        gb = run_prompt(model, PROMPT_B)
        low = min(ga["decode_margin"].min(), gb["decode_margin"].min())
        distinct = min(len(set(g["decode_tokens"].tolist())) for g in (ga, gb))
        eos = any(config.eos_token_id in g["decode_tokens"].tolist() for g in (ga, gb))
        if low >= MIN_MARGIN and distinct >= MIN_DISTINCT and not eos:
            break
        print(f"{name}: seed {seed}: min margin {low:.2e}, {distinct} distinct tokens"
              f"{', end-of-sequence token' if eos else ''}; next seed")
    else:
        raise SystemExit(f"{name}: no acceptable seed in {SEED_TRIES} tries")
    out_dir = os.path.join(GOLDEN_DIR, name)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    # save_pretrained also writes generation_config.json; the loader needs only config.json.
    gen_cfg = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)

    saved = load_file(os.path.join(out_dir, "model.safetensors"))
    if config.tie_word_embeddings:
        assert "lm_head.weight" not in saved, f"{name}: tied model saved lm_head.weight"
    else:
        assert "lm_head.weight" in saved, f"{name}: untied model lacks lm_head.weight"
    # HF's file is replaced by golden_weights' (the one tests make): the same tensors,
    # bit for bit.
    with open(os.path.join(out_dir, "weights.json"), "w") as f:
        json.dump(spec, f, separators=(",", ":"))
        f.write("\n")
    os.remove(os.path.join(out_dir, "model.safetensors"))
    golden_weights.ensure([name])
    ours = load_file(os.path.join(out_dir, "model.safetensors"))
    assert sorted(ours) == sorted(saved), f"{name}: weights.json names other tensors"
    for key, value in saved.items():
        assert np.array_equal(ours[key], value), f"{name}: {key} differs from HF's"

    golden = dict(ga)
    golden.update({k + "_b": v for k, v in gb.items()})
    save_file(
        golden,
        os.path.join(out_dir, "golden.safetensors"),
        # One key: safetensors writes metadata in hash order, so several keys would make
        # regeneration differ byte-wise from run to run.
        metadata={
            "generated_by": f"tests/llm/make_golden.py seed {seed}, transformers "
            f"{transformers.__version__}, torch {torch.__version__.split('+')[0]}"
        },
    )

    notes = []
    for tag, g in (("a", ga), ("b", gb)):
        e_p, e_d, same = cross_check(model, g)
        assert e_p <= 1e-5 and e_d <= 1e-5, f"{name}/{tag}: cached vs full {e_p} {e_d}"
        assert same, f"{name}/{tag}: generate() disagrees with the decode loop"
        notes.append(
            f"prompt {tag}: cached-vs-full rel err prefill {e_p:.2e} decode {e_d:.2e}, "
            f"generate() same tokens, min margin {g['decode_margin'].min():.4f}, "
            f"{len(set(g['decode_tokens'].tolist()))} distinct tokens"
        )
    if name == "llama3":
        plain, scaled, ratio, changed = check_rope_llama3(model)
        assert changed > 0, "llama3 rope scaling changes no frequency"
        notes.append(f"llama3 inv_freq plain/scaled ratio: {np.round(ratio, 4).tolist()}")
    print(f"{name}: seed {seed}, {len(saved)} tensors")
    for n in notes:
        print("   ", n)


@torch.no_grad()
def check(name):
    """Reload from disk (the path a loader takes) and reproduce the goldens."""
    out_dir = os.path.join(GOLDEN_DIR, name)
    golden_weights.ensure([name])
    model = AutoModelForCausalLM.from_pretrained(
        out_dir, attn_implementation="eager", dtype=torch.float32
    )
    model.eval()
    # from_pretrained maps the file, so tensors start wherever the safetensors header
    # leaves them (not 64-byte aligned). The CPU BLAS then takes another path for the
    # one-row decode matmuls and rounds differently (~1e-6 relative). Copying the weights
    # to fresh, aligned memory makes the reloaded model bit-identical to the one that
    # wrote the goldens, which is what this check is for.
    for p in model.parameters():
        p.data = p.data.clone()
    golden = load_file(os.path.join(out_dir, "golden.safetensors"))
    worst = 0.0
    for sfx in ("", "_b"):
        g = run_prompt(model, golden["prompt" + sfx].tolist())
        assert (g["decode_tokens"] == golden["decode_tokens" + sfx]).all(), name
        for k in ("prefill_logits", "decode_logits", "decode_margin"):
            worst = max(worst, float(np.max(np.abs(g[k] - golden[k + sfx]))))
    assert worst <= 1e-6, f"{name}: reloaded model differs by {worst}"
    print(f"{name}: reloaded, goldens reproduce (max |diff| {worst:.1e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="reload and verify, write nothing")
    ap.add_argument("names", nargs="*", help="subset of models (default: all)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    torch.use_deterministic_algorithms(True)
    configs = make_configs()
    names = args.names or list(configs)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for name in names:
        seed, config = configs[name]
        if args.check:
            check(name)
        else:
            write(name, seed, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
