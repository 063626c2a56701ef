#!/usr/bin/env python3
"""Checks the log_mel_spectrogram op against the real openai-whisper
`whisper.log_mel_spectrogram` (torch), on every device of the runtime (cpu, and cuda:N on
the GPU machine, where torch is installed), for n_mels 80 and 128: noise bursts with
silence, tones, a 30 s window with Whisper's padding, and espeak-ng speech when espeak-ng is
there. Prints one line per case and device with the largest absolute difference; exits 1
when any passes 1e-4 (the evidence bar of issue 29).

Whisper is imported as installed (`pip install openai-whisper`), else from an unpacked
openai-whisper sdist or checkout given with --whisper-src DIR (the folder holding
whisper/audio.py): only whisper/audio.py and whisper/utils.py are loaded, which need numpy
and torch alone.

    GPUKIT_LIBRARY=build/lib/libgpukit.so python3 tests/asr/check_whisper_torch.py \\
        [--whisper-src DIR] [--device cuda]
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

TOLERANCE = 1e-4


def load_whisper_audio(source: str | None):
    if source is None:
        try:
            return importlib.import_module("whisper.audio")
        except ImportError as e:
            sys.exit(f"check_whisper_torch: cannot import whisper ({e}); pip install "
                     "openai-whisper, or pass --whisper-src with an unpacked sdist")
    package_dir = os.path.join(os.path.abspath(source), "whisper")
    if not os.path.isfile(os.path.join(package_dir, "audio.py")):
        sys.exit(f"check_whisper_torch: {package_dir}/audio.py not found")
    # A bare package object, so that `whisper/__init__.py` (which imports the whole model,
    # tiktoken and numba) is not run: audio.py needs only .utils.
    package = types.ModuleType("whisper")
    package.__path__ = [package_dir]
    sys.modules["whisper"] = package
    return importlib.import_module("whisper.audio")


def cases(rng):
    t = np.arange(16000 * 5) / 16000.0
    bursts = np.zeros(16000 * 6, np.float32)
    for start in range(0, len(bursts), 8000):
        bursts[start:start + 4800] = rng.uniform(0.001, 0.5) * rng.standard_normal(
            min(4800, len(bursts) - start))
    yield "noise bursts 6 s", bursts, 0
    yield "tones 5 s", (0.3 * np.sin(2 * np.pi * 440 * t) +
                        0.1 * np.sin(2 * np.pi * 3000 * t)).astype(np.float32), 0
    yield "30 s window (padding=480000)", bursts[:16000 * 4], 480000
    try:
        import make_speech
        if make_speech.espeak_available():
            import gpukit
            with tempfile.TemporaryDirectory() as tmp:
                for path, rate, text, _voice in make_speech.make_speech_set(tmp):
                    if rate == 22050:
                        yield f"speech: {text}", gpukit.asr.load_audio(path), 0
    except ImportError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--whisper-src", help="folder holding whisper/audio.py (unpacked sdist)")
    parser.add_argument("--device", action="append",
                        help="gpukit device to check (repeatable; default: every device)")
    args = parser.parse_args()
    audio_mod = load_whisper_audio(args.whisper_src)
    import torch

    import gpukit

    devices = args.device or [str(d) for d in gpukit.devices()]
    torch_device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"whisper {getattr(audio_mod, '__file__', '?')}; torch {torch.__version__} on "
          f"{torch_device}; gpukit devices {devices}")
    worst = 0.0
    for name, samples, padding in cases(np.random.default_rng(29)):
        for n_mels in (80, 128):
            want = audio_mod.log_mel_spectrogram(torch.from_numpy(samples).to(torch_device),
                                                 n_mels=n_mels, padding=padding)
            want = want.cpu().numpy()
            for device in devices:
                got = gpukit.asr.log_mel_spectrogram(samples, n_mels, padding=padding,
                                                     device=device)
                if got.shape != want.shape:
                    print(f"FAIL {name} n_mels={n_mels} {device}: shape {got.shape} vs "
                          f"whisper {want.shape}")
                    worst = float("inf")
                    continue
                error = float(np.max(np.abs(got.astype(np.float64) - want)))
                worst = max(worst, error)
                verdict = "ok  " if error <= TOLERANCE else "FAIL"
                print(f"{verdict} {name} n_mels={n_mels} {device}: max |gpukit - whisper| = "
                      f"{error:.3g}")
    print(f"largest difference {worst:.3g} (bar {TOLERANCE})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
