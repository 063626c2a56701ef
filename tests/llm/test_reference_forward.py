"""The NumPy float64 reference forward reproduces the HF transformers goldens.

Needs only numpy and safetensors (no torch): it runs in CI. It shows that the golden
files are self-consistent (config + weights -> these logits and tokens) and that
reference_forward.py, which the C++ model runner follows, computes what HF computes.
"""

import os
import sys

import pytest

np = pytest.importorskip("numpy", reason="numpy is needed for the reference forward")
pytest.importorskip("safetensors.numpy", reason="safetensors is needed to read the goldens")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402

NAMES = ["llama", "llama3", "mistral", "qwen2", "qwen3", "smollm2", "gpt2"]


@pytest.mark.parametrize("name", NAMES)
def test_reference_reproduces_golden(name):
    # f32 tolerance of issue 28: 1e-4 relative per logit row; greedy tokens identical
    # (the goldens hold no near-tie, see README.md).
    worst = ref.check_golden(name, tol=1e-4)
    assert worst < 1e-4


def test_golden_layout():
    for name in NAMES:
        g = ref.load_file(os.path.join(ref.GOLDEN_DIR, name, "golden.safetensors"))
        for sfx in ("", "_b"):
            t = len(g["prompt" + sfx])
            assert g["prompt" + sfx].dtype == np.int32
            assert g["prefill_logits" + sfx].shape == (t, 320)
            assert g["decode_tokens" + sfx].shape == (32,)
            assert g["decode_tokens" + sfx].dtype == np.int32
            assert g["decode_logits" + sfx].shape == (32, 320)
            assert g["decode_logits" + sfx].dtype == np.float32
            assert g["decode_margin" + sfx].shape == (32,)
            # tokens[i+1] is the argmax of decode step i
            assert (np.argmax(g["decode_logits" + sfx][:-1], axis=1)
                    == g["decode_tokens" + sfx][1:]).all()
            assert np.argmax(g["prefill_logits" + sfx][-1]) == g["decode_tokens" + sfx][0]
        assert len(g["prompt"]) != len(g["prompt_b"])


def _prefill_error(model, name):
    g = ref.load_file(os.path.join(ref.GOLDEN_DIR, name, "golden.safetensors"))
    logits = model.forward(g["prompt"].astype(np.int64), ref.KVCache(model.n_layers))
    return ref.row_rel_err(logits, g["prefill_logits"]).max()


def test_goldens_catch_a_missing_feature():
    """Each architecture's difference from plain Llama shows in its golden logits, so a
    loader that ignores it fails; the weights are random enough for that to be loud."""
    folder = lambda n: os.path.join(ref.GOLDEN_DIR, n)  # noqa: E731

    m = ref.load_model(folder("llama3"))  # llama3 rope scaling dropped
    m.inv_freq = 1.0 / 500000.0 ** (np.arange(0, m.head_dim, 2) / m.head_dim)
    assert _prefill_error(m, "llama3") > 1e-2

    m = ref.load_model(folder("qwen2"))  # q/k/v bias dropped
    m.w = {k: v for k, v in m.w.items() if not k.endswith("_proj.bias")}
    assert _prefill_error(m, "qwen2") > 1e-2

    m = ref.load_model(folder("qwen3"))  # q/k norm dropped
    m.w = {k: v for k, v in m.w.items() if "_norm." not in k}
    assert _prefill_error(m, "qwen3") > 1e-2

    m = ref.load_model(folder("llama"))  # GGUF-style interleaved rotary pairs instead of HF's
    hf_rope = ref.apply_rope

    def interleaved(x, positions, inv_freq):
        angles = np.outer(positions, inv_freq)
        cos, sin = np.cos(angles), np.sin(angles)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    ref.apply_rope = interleaved
    try:
        assert _prefill_error(m, "llama") > 1e-2
    finally:
        ref.apply_rope = hf_rope

    # GPT-2 Conv1D weight read as nn.Linear's [out, in]: the non-square ones fail on shape,
    # the square attn.c_proj would go through silently wrong.
    m = ref.load_model(folder("gpt2"))
    for k in list(m.w):
        if k.endswith("attn.c_proj.weight"):
            m.w[k] = np.ascontiguousarray(m.w[k].T)
    assert _prefill_error(m, "gpt2") > 1e-2
