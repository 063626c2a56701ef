"""gpukit.llm over the C ABI's model calls, on the golden models of tests/llm/golden (the
C++ suite llm_model_tests checks every row of logits; here the Python surface)."""
import os

import numpy as np
import pytest

import gpukit

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "llm", "golden")


def _golden(name, key):
    w = gpukit.load_weights(os.path.join(GOLDEN, name, "golden.safetensors"), device="cpu")
    try:
        return w[key].to_numpy().copy()
    finally:
        w.close()


@pytest.mark.parametrize("name", ["llama", "qwen3", "gpt2"])
def test_greedy_generate_gives_the_golden_tokens(name):
    model = gpukit.llm.load(os.path.join(GOLDEN, name), device="cpu")
    assert model.vocab_size == 320
    tokens = model.generate(_golden(name, "prompt"), max_new_tokens=32)
    assert tokens == _golden(name, "decode_tokens").tolist()


def test_step_returns_hf_logits_and_sampling_repeats_with_a_seed():
    model = gpukit.llm.load(os.path.join(GOLDEN, "smollm2"), device="cpu", dtype="f32")
    assert model.architecture == "LlamaForCausalLM" and model.dtype == "f32"
    s = model.session()
    logits = s.step(_golden("smollm2", "prompt"), all_logits=True)
    ref = _golden("smollm2", "prefill_logits")
    err = np.abs(logits - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert err.max() <= 1e-4
    assert len(s) == 11
    args = dict(max_new_tokens=12, temperature=0.9, top_k=50, top_p=0.95, seed=7)
    a = model.generate([1, 2, 3], **args)
    assert len(a) == 12 and model.generate([1, 2, 3], **args) == a


def test_bad_arguments_raise_with_the_library_message():
    with pytest.raises(ValueError, match="not a model dtype"):
        gpukit.llm.load(os.path.join(GOLDEN, "llama"), dtype="i32")
    model = gpukit.llm.load(os.path.join(GOLDEN, "llama"), device="cpu")
    with pytest.raises(gpukit.errors.GpukitError, match="token id 320 at index 0"):
        model.session().step([320])
    with pytest.raises(gpukit.errors.GpukitError, match="top_p 1.5"):
        model.generate([1], top_p=1.5)
