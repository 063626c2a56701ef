"""How close bf16 can come to the f32 HF goldens on these tiny random models.

The bf16 test of model_test.cpp compares the runner's bf16 logits with the f32 goldens
(HF transformers in float32), per row: max|ours - golden| / max|golden|. This file measures,
with the NumPy float64 reference forward, what bf16 costs before any implementation choice:

  * the weights rounded to bf16 and everything else exact (float64 activations, f32 norm
    weights): the floor every bf16 implementation sits on;
  * one more bf16 rounding of the activations at a single place (the matmul inputs, or the
    KV cache): what each rounding point a bf16 runner needs adds on its own.

These random models amplify a relative perturbation of 2^-9 (one bf16 rounding) about
ten-fold into the logits, so the floor already exceeds issue 28's 2e-2 for qwen2 and
smollm2; model_test.cpp's bf16 bound is set from these numbers, not from the runner's.
"""

import os
import sys

import pytest

np = pytest.importorskip("numpy", reason="numpy is needed for the reference forward")
pytest.importorskip("safetensors.numpy", reason="safetensors is needed to read the goldens")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402

LLAMA_NAMES = ["llama", "llama3", "mistral", "qwen2", "qwen3", "smollm2"]


def round_bf16(x):
    """Round to the nearest bf16 (ties to even), returned as float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def bf16_model(name):
    """The golden model with every matrix, embedding and bias rounded to bf16; norm weights
    stay f32, as the runner holds them."""
    m = ref.load_model(os.path.join(ref.GOLDEN_DIR, name))
    m.w = {k: v if ("norm" in k or ".ln_" in k) else round_bf16(v) for k, v in m.w.items()}
    if hasattr(m, "lm_head"):
        m.lm_head = m.w.get("lm_head.weight", m.w.get("model.embed_tokens.weight"))
    return m


def worst_row_error(model, name):
    """Teacher-forced prefill + 32 decode steps of both prompts (the golden tokens are fed,
    as model_test.cpp does); the worst per-row error against the f32 goldens."""
    g = ref.load_file(os.path.join(ref.GOLDEN_DIR, name, "golden.safetensors"))
    worst = 0.0
    for sfx in ("", "_b"):
        cache = ref.KVCache(model.n_layers)
        rows = [model.forward(g["prompt" + sfx].astype(np.int64), cache)]
        for tok in g["decode_tokens" + sfx]:
            rows.append(model.forward(np.array([tok]), cache))
        golden = np.concatenate([g["prefill_logits" + sfx], g["decode_logits" + sfx]])
        worst = max(worst, float(ref.row_rel_err(np.concatenate(rows), golden).max()))
    return worst


@pytest.fixture(scope="module")
def floors():
    names = LLAMA_NAMES + ["gpt2"]
    return {n: worst_row_error(bf16_model(n), n) for n in names}


def test_rounding_the_weights_alone_exceeds_2e2_on_qwen2_and_smollm2(floors):
    # Measured: llama 1.8e-2, llama3 2.2e-2, mistral 2.3e-2, qwen2 2.5e-2, qwen3 1.7e-2,
    # smollm2 2.2e-2, gpt2 8.2e-3.
    print({n: f"{e:.2e}" for n, e in floors.items()})
    assert floors["qwen2"] > 2e-2 and floors["smollm2"] > 2e-2
    assert all(e < 3e-2 for e in floors.values())


@pytest.mark.parametrize("name", ["llama", "mistral"])
def test_one_more_rounding_point_can_raise_the_worst_row_past_the_floor(name):
    """The KV cache in bf16 (keys after rotary, values), nothing else rounded but the
    weights: on llama and mistral the worst row grows by 4.0e-3 and 2.4e-3 over the floor
    on its own. (Not on every model: the worst row's errors may partly cancel, by up to
    2e-3 here on smollm2, llama3 and qwen2; the bound of model_test.cpp covers the
    larger case.)"""
    base = bf16_model(name)
    floor = worst_row_error(base, name)
    append = ref.KVCache.append

    def bf16_append(self, layer, k, v):
        return append(self, layer, round_bf16(k), round_bf16(v))

    ref.KVCache.append = bf16_append
    try:
        with_cache = worst_row_error(bf16_model(name), name)
    finally:
        ref.KVCache.append = append
    print(f"{name}: floor {floor:.2e}, with a bf16 KV cache {with_cache:.2e}")
    assert with_cache > floor + 2e-3
