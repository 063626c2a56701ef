"""Test audio made at test time (none is committed): sentences spoken by Debian's espeak-ng,
sines, and the same sounds written as WAV/FLAC/Ogg Vorbis at several sample rates.

    python3 tests/asr/make_speech.py OUT_DIR     # writes the speech set and lists it

espeak-ng speaks at 22050 Hz. The 8 kHz, 16 kHz and 44.1 kHz versions are made here by
exact FFT resampling in numpy (band-limited, independent of libsoxr, which the runtime
uses), so a test can compare the runtime's resampling of each with the others. Files are
encoded through the system libsndfile by ctypes (libsndfile1, which libsndfile1-dev
installs), so FLAC and Ogg Vorbis need no Python audio package.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
import wave

import numpy as np

ESPEAK_RATE = 22050

# Sentences from the Harvard sentence lists (IEEE 1969), public domain.
SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
]
VOICES = [("en-us", 160), ("en", 130), ("en-us+f3", 190)]

# libsndfile's format codes (sndfile.h).
SF_FORMAT_WAV, SF_FORMAT_FLAC, SF_FORMAT_OGG = 0x010000, 0x170000, 0x200000
SF_FORMAT_PCM_16, SF_FORMAT_FLOAT, SF_FORMAT_VORBIS = 0x0002, 0x0006, 0x0060
SFM_WRITE = 0x20
FORMATS = {
    "wav": SF_FORMAT_WAV | SF_FORMAT_PCM_16,
    "wav-float": SF_FORMAT_WAV | SF_FORMAT_FLOAT,
    "flac": SF_FORMAT_FLAC | SF_FORMAT_PCM_16,
    "ogg": SF_FORMAT_OGG | SF_FORMAT_VORBIS,
}


class _SfInfo(ctypes.Structure):
    _fields_ = [("frames", ctypes.c_int64), ("samplerate", ctypes.c_int),
                ("channels", ctypes.c_int), ("format", ctypes.c_int),
                ("sections", ctypes.c_int), ("seekable", ctypes.c_int)]


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def _libsndfile():
    name = ctypes.util.find_library("sndfile")
    if not name:
        raise RuntimeError("libsndfile not found (apt-get install libsndfile1)")
    lib = ctypes.CDLL(name)
    lib.sf_open.restype = ctypes.c_void_p
    lib.sf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_SfInfo)]
    lib.sf_writef_float.restype = ctypes.c_int64
    lib.sf_writef_float.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float),
                                    ctypes.c_int64]
    lib.sf_close.argtypes = [ctypes.c_void_p]
    lib.sf_strerror.restype = ctypes.c_char_p
    lib.sf_strerror.argtypes = [ctypes.c_void_p]
    return lib


def write_sound(path: str, samples: np.ndarray, rate: int, fmt: str = "wav") -> str:
    """Writes [frames] or [frames, channels] float samples in [-1, 1] through libsndfile."""
    lib = _libsndfile()
    data = np.ascontiguousarray(samples, dtype=np.float32)
    channels = 1 if data.ndim == 1 else data.shape[1]
    info = _SfInfo(0, int(rate), channels, FORMATS[fmt], 0, 0)
    handle = lib.sf_open(os.fsencode(path), SFM_WRITE, ctypes.byref(info))
    if not handle:
        raise RuntimeError(f"libsndfile cannot write {path}: {lib.sf_strerror(None).decode()}")
    try:
        frames = data.shape[0]
        written = lib.sf_writef_float(handle, data.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                      frames)
        if written != frames:
            raise RuntimeError(f"libsndfile wrote {written} of {frames} frames to {path}")
    finally:
        lib.sf_close(handle)
    return path


def read_wav16(path: str):
    """A 16-bit PCM WAV (what espeak-ng writes) as float samples / 32768 and its rate."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise RuntimeError(f"{path}: {8 * w.getsampwidth()}-bit samples; expected 16")
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32)
        data = data.reshape(-1, w.getnchannels())
        return (data[:, 0] if data.shape[1] == 1 else data) / 32768.0, w.getframerate()


def speak(text: str, path: str, voice: str = "en-us", words_per_minute: int = 160) -> str:
    """espeak-ng's WAV (22050 Hz, mono, 16-bit) of `text`."""
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(words_per_minute), "-w", path, text],
                   check=True, capture_output=True)
    return path


def resample_fft(x: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Band-limited resampling by zero-padding or truncating the spectrum (as
    scipy.signal.resample does): exact for a signal periodic over its length."""
    n_out = int(round(len(x) * to_rate / from_rate))
    spectrum = np.fft.rfft(x.astype(np.float64))
    out_bins = n_out // 2 + 1
    resized = np.zeros(out_bins, dtype=complex)
    keep = min(out_bins, len(spectrum))
    resized[:keep] = spectrum[:keep]
    return (np.fft.irfft(resized, n_out) * (n_out / len(x))).astype(np.float32)


def sine(frequency: float, rate: int, seconds: float, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(rate * seconds))) / rate
    return (amplitude * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def make_speech_set(out_dir: str) -> list:
    """Each sentence in each voice at 8000, 16000, 22050 and 44100 Hz as 16-bit WAV:
    [(path, rate, sentence, voice)]."""
    os.makedirs(out_dir, exist_ok=True)
    made = []
    for i, text in enumerate(SENTENCES):
        voice, wpm = VOICES[i % len(VOICES)]
        spoken, rate = read_wav16(speak(text, os.path.join(out_dir, f"s{i}_espeak.wav"), voice,
                                        wpm))
        # Zero-padded to a whole number of 20 ms (441 samples), so that every rate below
        # holds a whole number of samples and the FFT resampling is exact.
        samples = np.pad(spoken, (0, -len(spoken) % 441))
        path = write_sound(os.path.join(out_dir, f"s{i}_22050.wav"), samples, rate, "wav")
        made.append((path, rate, text, voice))
        for to_rate in (8000, 16000, 44100):
            path = os.path.join(out_dir, f"s{i}_{to_rate}.wav")
            clipped = np.clip(resample_fft(samples, rate, to_rate), -1.0, 1.0)
            made.append((write_sound(path, clipped, to_rate, "wav"), to_rate, text, voice))
    return made


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for entry in make_speech_set(sys.argv[1]):
        print(*entry, sep="\t")
