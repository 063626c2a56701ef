"""GGUF files as llama.cpp's converter writes them (gguf_models.py) load and run as the
SafeTensors folder they were made from: GPT-2 (llama.cpp's "gpt2": [out, in] projections,
fused attn_qkv) and Llama 3 with its rope scaling kept as the tensor rope_freqs.weight.
Both files hold the same float32 weights, so the logits of a prefill and 32 teacher-forced
decode steps must agree with the SafeTensors path's to float32 rounding, and with HF's
goldens within the f32 tolerance, greedy tokens included.
"""

import os
import sys

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("gguf", reason="the gguf package is not installed (make deps)")
pytest.importorskip("safetensors.numpy", reason="safetensors is needed to read the goldens")
try:  # an installed gpukit, else the checkout's (as tests/python/conftest.py does)
    import gpukit
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
    import gpukit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_models  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

GOLDEN = gguf_models.GOLDEN_DIR


def _golden(name):
    return load_file(os.path.join(GOLDEN, name, "golden.safetensors"))


def _teacher_forced(model, prompt, tokens):
    """Prefill logits of every prompt position, then one row per fed token."""
    s = model.session()
    rows = [s.step(prompt, all_logits=True)]
    rows += [s.step([int(t)])[None, :] for t in tokens]
    return np.concatenate(rows)


def _row_err(ours, ref):
    ref = np.asarray(ref, dtype=np.float64)
    return float((np.abs(ours - ref).max(axis=1) / np.abs(ref).max(axis=1)).max())


def _device(kind):
    """"cpu", or "cuda" when the runtime has a CUDA device (else the test skips)."""
    if kind == "cuda":
        try:
            gpukit.Runtime().device("cuda")
        except Exception as e:  # no CUDA device, or a build without CUDA
            pytest.skip(f"no CUDA device: {e}")
    return kind


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
@pytest.mark.parametrize("name", ["gpt2", "llama3"])
def test_a_gguf_runs_as_its_safetensors_folder(name, kind, tmp_path):
    device = _device(kind)
    path = tmp_path / f"{name}.gguf"
    gguf_models.write(name, path)
    from_gguf = gpukit.llm.load(str(path), device=device)
    from_folder = gpukit.llm.load(os.path.join(GOLDEN, name), device=device)
    assert from_gguf.architecture == from_folder.architecture
    assert from_gguf.vocab_size == 320
    g = _golden(name)
    for sfx in ("", "_b"):
        prompt, tokens = g["prompt" + sfx], g["decode_tokens" + sfx]
        ours = _teacher_forced(from_gguf, prompt, tokens)
        theirs = _teacher_forced(from_folder, prompt, tokens)
        # Same weights (measured: identical logits on the cpu device); GPT-2's matmuls read
        # the weights transposed and Llama 3's rope takes its frequencies from the fitted
        # attributes, so another kernel may round differently.
        assert _row_err(ours, theirs) <= 1e-5, f"{name}{sfx}: GGUF and SafeTensors disagree"
        hf = np.concatenate([g["prefill_logits" + sfx], g["decode_logits" + sfx]])
        assert _row_err(ours, hf) <= 1e-4
        assert from_gguf.generate(prompt, 32) == tokens.tolist()


def test_llama3_rope_freqs_is_what_makes_the_gguf_right(tmp_path):
    """Without rope_freqs.weight the same file is plain Llama rope: its logits then miss
    HF's (which use the llama3 scaling) by far, so the loader did read the tensor."""
    path = tmp_path / "llama3_plain.gguf"
    gguf_models.write_llama("llama3", path, rope_freqs=False)
    model = gpukit.llm.load(str(path), device="cpu")
    g = _golden("llama3")
    logits = model.session().step(g["prompt"], all_logits=True)
    assert _row_err(logits, g["prefill_logits"]) > 1e-2


def test_rope_freqs_that_are_not_llama3_scaling_are_refused(tmp_path):
    import gguf
    path = tmp_path / "odd.gguf"
    gguf_models.write_llama("llama3", path)
    reader = gguf.GGUFReader(str(path), "r+")
    freqs = next(t for t in reader.tensors if t.name == "rope_freqs.weight")
    freqs.data[:] = np.array([1, 3, 2, 8, 8, 8, 8, 8], dtype=np.float32)  # not monotone
    del reader
    with pytest.raises(gpukit.errors.GpukitError, match="rope_freqs.weight does not follow"):
        gpukit.llm.load(str(path), device="cpu")
