"""gpukit.llm over the C ABI's model calls, on the golden models of tests/llm/golden (the
C++ suite llm_model_tests checks every row of logits; here the Python surface)."""
import gc
import os
import sys

import numpy as np
import pytest

import gpukit

LLM_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llm")
GOLDEN = os.path.join(LLM_TESTS, "golden")


@pytest.fixture(autouse=True, scope="module")
def golden_model_weights():
    """The golden models' model.safetensors, written from their weights.json."""
    sys.path.insert(0, LLM_TESTS)
    import golden_weights
    golden_weights.ensure()


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


def _write_gguf(name, path):
    """The golden model as llama.cpp's converter writes it: GGUF names and metadata, q/k
    rows permuted for its interleaved rope (convert_hf_to_gguf's LlamaModel.permute)."""
    gguf = pytest.importorskip("gguf", reason="the gguf package is not installed (make deps)")
    import json
    folder = os.path.join(GOLDEN, name)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    w = gpukit.load_weights(os.path.join(folder, "model.safetensors"), device="cpu")
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = gguf.GGUFWriter(str(path), "llama")
    out.add_block_count(cfg["num_hidden_layers"])
    out.add_context_length(cfg["max_position_embeddings"])
    out.add_embedding_length(cfg["hidden_size"])
    out.add_feed_forward_length(cfg["intermediate_size"])
    out.add_head_count(heads)
    out.add_head_count_kv(kv_heads)
    out.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    out.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    out.add_vocab_size(cfg["vocab_size"])

    def permute(x, n):
        return x.reshape(n, 2, x.shape[0] // n // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    top = {"model.embed_tokens.weight": "token_embd.weight",
           "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight",
                 "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight",
                 "self_attn.o_proj.weight": "attn_output.weight",
                 "post_attention_layernorm.weight": "ffn_norm.weight",
                 "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
                 "mlp.down_proj.weight": "ffn_down.weight"}
    for key in w:
        value = w[key].to_numpy().astype(np.float32)
        if key in top:
            out.add_tensor(top[key], np.ascontiguousarray(value))
            continue
        parts = key.split(".")
        role = ".".join(parts[3:])
        if role == "self_attn.q_proj.weight":
            value = permute(value, heads)
        elif role == "self_attn.k_proj.weight":
            value = permute(value, kv_heads)
        out.add_tensor(f"blk.{parts[2]}.{per_layer[role]}", np.ascontiguousarray(value))
    w.close()
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()


@pytest.mark.parametrize("name", ["llama", "smollm2"])
def test_a_gguf_of_the_golden_model_gives_hf_logits(name, tmp_path):
    path = tmp_path / f"{name}.gguf"
    _write_gguf(name, path)
    model = gpukit.llm.load(path, device="cpu")
    assert model.architecture == "LlamaForCausalLM" and model.vocab_size == 320
    logits = model.session().step(_golden(name, "prompt"), all_logits=True)
    ref = _golden(name, "prefill_logits")
    err = np.abs(logits - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert err.max() <= 1e-4, "the q/k rows were not un-permuted"
    assert model.generate(_golden(name, "prompt"), 32) == _golden(name, "decode_tokens").tolist()


def test_smollm2_gguf_says_paris(smollm2_gguf):
    path = smollm2_gguf
    model = gpukit.llm.load(path, device="cpu")
    assert (model.num_layers, model.vocab_size) == (30, 49152)
    weights = gpukit.load_weights(path)
    try:
        tokenizer = gpukit.Tokenizer.from_weights(weights)
    finally:
        weights.close()
    out = model.generate(tokenizer.encode("The capital of France is"), max_new_tokens=4)
    assert tokenizer.decode(out).startswith(" Paris")


# ---- text prompts, streaming, batches and task charging (ABI 1.7) ----

@pytest.fixture(scope="module")
def smollm2(smollm2_gguf):
    return gpukit.llm.load(smollm2_gguf, device="cpu")


def test_a_text_prompt_says_paris_with_the_c_paths_tokens(smollm2):
    question = "The capital of France is"
    text = smollm2.generate(question, max_new_tokens=6)
    assert isinstance(text, str) and "Paris" in text
    tok = smollm2.tokenizer
    assert isinstance(tok, gpukit.Tokenizer) and tok.vocab_size == 49152
    stops = [t for t in (tok.eos_id, tok.eot_id) if t is not None]
    c_path = smollm2.session().generate(tok.encode(question), max_new_tokens=6,
                                        stop_tokens=stops)
    assert text.tokens == c_path
    assert text == tok.decode(c_path, skip_special=True)


def test_stream_pieces_join_to_the_text_and_a_batch_equals_singles(smollm2):
    prompts = ["The capital of France is", "My favourite colour is", "1, 2, 3,"]
    args = dict(max_new_tokens=10, temperature=0.7, top_k=40, seed=[3, 4, 5])
    batch = smollm2.generate(prompts, **args)
    singles = [smollm2.generate(p, max_new_tokens=10, temperature=0.7, top_k=40, seed=s)
               for p, s in zip(prompts, args["seed"])]
    assert batch == singles and [b.tokens for b in batch] == [s.tokens for s in singles]
    pieces = list(smollm2.generate(prompts[1], max_new_tokens=10, temperature=0.7, top_k=40,
                                   seed=4, stream=True))
    assert len(pieces) > 1 and all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == singles[1]


def test_a_stop_string_ends_the_text_before_it(smollm2):
    full = smollm2.generate("1, 2, 3,", max_new_tokens=12)
    assert ", 5" in full, full
    cut = smollm2.generate("1, 2, 3,", max_new_tokens=12, stop=", 5")
    assert cut == full[:full.index(", 5")]
    streamed = "".join(smollm2.generate("1, 2, 3,", max_new_tokens=12, stop=", 5",
                                        stream=True))
    assert streamed == cut


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_token_streams_and_batches_of_the_golden_models_equal_single_generations(name):
    model = gpukit.llm.load(os.path.join(GOLDEN, name), device="cpu")
    a, b = _golden(name, "prompt"), _golden(name, "prompt_b")
    golden = _golden(name, "decode_tokens").tolist()
    assert list(model.generate(a, max_new_tokens=32, stream=True)) == golden
    args = dict(max_new_tokens=[32, 20], temperature=[0.0, 0.9], seed=[0, 11])
    out = model.generate([a, b], **args)
    assert out[0] == golden
    assert out[1] == model.generate(b, max_new_tokens=20, temperature=0.9, seed=11)
    assert len(out[1]) == 20


def test_a_greedy_batch_draws_every_row_in_one_call_and_equals_singles():
    # All rows greedy: the batch draws them with one sample call on the device.
    model = gpukit.llm.load(os.path.join(GOLDEN, "qwen2"), device="cpu")
    a, b = _golden("qwen2", "prompt"), _golden("qwen2", "prompt_b")
    out = model.generate([a, b, a], max_new_tokens=[16, 16, 9])
    assert out[2] == out[0][:len(out[2])]  # greedy: the same prompt gives a prefix
    assert out[0] == model.generate(a, max_new_tokens=16)
    assert out[1] == model.generate(b, max_new_tokens=16)
    assert out[2] == model.generate(a, max_new_tokens=9)


def test_a_batch_takes_and_drops_sequences_between_steps():
    model = gpukit.llm.load(os.path.join(GOLDEN, "qwen3"), device="cpu")
    a, b = _golden("qwen3", "prompt"), _golden("qwen3", "prompt_b")
    batch = model.batch(max_context=64)
    first = batch.add(a, max_new_tokens=12)
    for _ in range(3):
        assert batch.step() == 1
    second = batch.add(b, max_new_tokens=6, temperature=0.8, seed=5)
    dropped = batch.add(a, max_new_tokens=30)
    assert batch.step() == 3
    batch.remove(dropped)
    with pytest.raises(gpukit.errors.GpukitError, match="is not in the batch"):
        batch.tokens(dropped)
    while batch.step():
        pass
    assert batch.tokens(first) == (model.generate(a, max_new_tokens=12), True)
    assert batch.tokens(second) == (model.generate(b, max_new_tokens=6, temperature=0.8,
                                                   seed=5), True)


def test_a_kv_cache_over_the_tasks_memory_limit_raises_and_the_model_works_on():
    model = gpukit.llm.load(os.path.join(GOLDEN, "llama"), device="cpu")
    prompt = _golden("llama", "prompt")
    roomy = gpukit.Task("kv-roomy", device="cpu")
    s = model.session(max_context=256, task=roomy)
    # llama: 2 layers x (keys + values) x 256 positions x 2 kv heads x 16 x 4 bytes
    assert roomy.info()["memory_in_use"] >= 2 * 2 * 256 * 2 * 16 * 4
    tight = gpukit.Task("kv-tight", memory_limit=32 * 1024, device="cpu")
    with pytest.raises(gpukit.errors.GpukitError, match="quota of owner 'task:kv-tight'"):
        model.session(max_context=256, task=tight)
    assert s.generate(prompt, max_new_tokens=32) == _golden("llama", "decode_tokens").tolist()
    del s
    # The session's blocks go back to the model's KV pool, which leaves with the model.
    assert roomy.info()["memory_in_use"] > 0
    del model
    gc.collect()
    assert roomy.info()["memory_in_use"] == 0


def test_a_sessions_steps_and_draws_are_launched_on_its_tasks_stream():
    model = gpukit.llm.load(os.path.join(GOLDEN, "llama"), device="cpu")
    prompt = _golden("llama", "prompt")
    t = gpukit.Task("decode", device="cpu")
    s = model.session(max_context=64, task=t)
    assert t.info()["ops_launched"] == 0
    tokens = s.generate(prompt, max_new_tokens=4)
    launched = t.info()["ops_launched"]
    assert launched > 4  # the plugin's ops of each step, and each draw
    assert t.state == "Running"
    # A session of no task launches nothing of t's, and gives the same tokens.
    assert model.session(max_context=64).generate(prompt, max_new_tokens=4) == tokens
    assert t.info()["ops_launched"] == launched
    t.complete()
    with pytest.raises(gpukit.errors.FailedPrecondition, match="task 'decode' is Completed"):
        s.step([tokens[-1]])


def test_a_batched_step_of_smollm2_gives_each_session_its_own_logits(smollm2):
    tok = smollm2.tokenizer
    prompts = [tok.encode(p) for p in ("The capital of France is", "Hi", "A B C D E F G")]
    assert len({len(p) for p in prompts}) == 3
    batched = [smollm2.session(max_context=64) for _ in prompts]
    alone = [smollm2.session(max_context=64) for _ in prompts]
    nxt = [int(np.argmax(s.step(p))) for s, p in zip(batched, prompts)]
    for s, p in zip(alone, prompts):
        s.step(p)
    for _ in range(3):
        rows = smollm2.step_batch(batched, nxt)
        for i, s in enumerate(alone):
            ref = s.step([nxt[i]])
            assert np.abs(rows[i] - ref).max() / np.abs(ref).max() <= 1e-5
            assert int(np.argmax(rows[i])) == int(np.argmax(ref))
        nxt = [int(np.argmax(r)) for r in rows]
    assert [len(s) for s in batched] == [len(s) for s in alone]
