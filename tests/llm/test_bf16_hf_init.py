"""bf16 logits of every architecture within issue 28's 2e-2 of the exact ones, on models at
HF transformers' initialisation scale.

The f32 goldens under golden/ use weights of std 0.15, which amplify one bf16 rounding of a
weight (2^-9 relative) about ten-fold into the logits (test_bf16_floor.py measures it), so
their bf16 check can only hold 5e-2. A model as HF creates it (matrices and embeddings
N(0, initializer_range = 0.02)) does not amplify so: here each golden architecture gets such
weights (seeded, made by NumPy at test time: nothing large is stored), with norm weights
around 1 and small biases so that every tensor takes part, and the runner's bf16 logits of
a prefill and 32 teacher-forced decode steps are compared per row (max |ours - exact| /
max |exact|) with the NumPy float64 reference forward on the same f32 weights
(reference_forward.py, itself checked against HF to 2.4e-6 by the goldens). Where torch and
transformers are installed, HF's own f32 logits are the reference too.

Measured (cpu): the worst row is 5.9e-3 (qwen2) to 7.9e-3 (qwen3); the test prints them.
"""

import json
import os
import shutil
import sys

import pytest

np = pytest.importorskip("numpy", reason="numpy is needed for the reference forward")
safetensors_numpy = pytest.importorskip("safetensors.numpy",
                                        reason="safetensors is needed to write the models")

import gpukit  # noqa: E402
import gpukit.llm  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402

NAMES = ["llama", "llama3", "mistral", "qwen2", "qwen3", "smollm2", "gpt2"]
BF16_TOLERANCE = 2e-2  # issue 28
F32_TOLERANCE = 1e-4


def _devices():
    out = ["cpu"]
    out += [f"cuda:{d.ordinal}" for d in gpukit.devices() if d.kind == "cuda"][:1]
    return out


def hf_init_model(name, folder):
    """The golden model `name`'s config and tensor shapes with weights at HF's scale."""
    src = os.path.join(ref.GOLDEN_DIR, name)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    std = float(config.get("initializer_range", 0.02))
    rng = np.random.default_rng(28 + NAMES.index(name))
    weights = {}
    for key, tensor in sorted(safetensors_numpy.load_file(
            os.path.join(src, "model.safetensors")).items()):
        if tensor.ndim == 1 and ("norm" in key or ".ln_" in key):
            if key.endswith(".bias"):
                value = 0.02 * rng.standard_normal(tensor.shape)
            else:
                value = 1.0 + 0.1 * rng.standard_normal(tensor.shape)
        elif tensor.ndim == 1:  # projection biases
            value = 0.02 * rng.standard_normal(tensor.shape)
        else:
            value = std * rng.standard_normal(tensor.shape)
        weights[key] = value.astype(np.float32)
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), folder)
    safetensors_numpy.save_file(weights, os.path.join(folder, "model.safetensors"))
    golden = safetensors_numpy.load_file(os.path.join(src, "golden.safetensors"))
    return golden["prompt"].astype(np.int64), golden["decode_tokens"].astype(np.int64)


def exact_logits(folder, prompt, tokens):
    model = ref.load_model(folder)
    cache = ref.KVCache(model.n_layers)
    rows = [model.forward(prompt, cache)]
    rows += [model.forward(np.array([t]), cache) for t in tokens]
    return np.concatenate(rows)


def our_logits(folder, prompt, tokens, device, dtype):
    model = gpukit.llm.load(folder, device=device, dtype=dtype)
    session = model.session(max_context=len(prompt) + len(tokens) + 1)
    rows = [session.step(prompt.tolist(), all_logits=True)]
    rows += [session.step([int(t)])[None, :] for t in tokens]
    return np.concatenate(rows)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_init")
    out = {}
    for name in NAMES:
        folder = str(root / name)
        prompt, tokens = hf_init_model(name, folder)
        out[name] = (folder, prompt, tokens, exact_logits(folder, prompt, tokens))
    return out


@pytest.mark.parametrize("device", _devices())
def test_bf16_logits_of_every_architecture_are_within_2e2_of_the_exact_ones(models, device):
    worst = {}
    for name, (folder, prompt, tokens, exact) in models.items():
        bf16 = our_logits(folder, prompt, tokens, device, "bf16")
        f32 = our_logits(folder, prompt, tokens, device, None)
        worst[name] = float(ref.row_rel_err(bf16, exact).max())
        assert ref.row_rel_err(f32, exact).max() <= F32_TOLERANCE, name
    print(f"\n[ bf16 at HF init, {device} ] worst row error: " +
          ", ".join(f"{n} {e:.1e}" for n, e in worst.items()))
    assert max(worst.values()) <= BF16_TOLERANCE, worst


def test_hf_transformers_agrees_with_the_exact_logits_and_ours(models):
    torch = pytest.importorskip("torch", reason="torch is not installed (CI): the NumPy "
                                "reference stands in for HF, checked against it by the goldens")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    for name, (folder, prompt, tokens, exact) in models.items():
        hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        ids = torch.tensor(np.concatenate([prompt, tokens])[None, :])
        with torch.no_grad():
            logits = hf(ids).logits[0].double().numpy()
        assert ref.row_rel_err(logits, exact).max() <= F32_TOLERANCE, name
        bf16 = our_logits(folder, prompt, tokens, "cpu", "bf16")
        assert ref.row_rel_err(bf16, logits).max() <= BF16_TOLERANCE, name
