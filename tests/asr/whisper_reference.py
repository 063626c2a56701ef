"""A numpy transcription of openai-whisper's `whisper/audio.py` log_mel_spectrogram
(20250625), step for step, for CI where torch is not installed:

    window = torch.hann_window(N_FFT)
    stft = torch.stft(audio, N_FFT, HOP_LENGTH, window=window, return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    mel_spec = filters @ magnitudes
    log_spec = torch.clamp(mel_spec, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    log_spec = (log_spec + 4.0) / 4.0

torch.stft's defaults there: center=True with reflect padding of n_fft // 2, onesided, no
normalisation; torch.hann_window is periodic. The filterbank is Whisper's own
mel_filters.npz (fixtures/). Computed in float64, so it is the exact answer that both our
op and Whisper's float32 torch code approximate.
"""
from __future__ import annotations

import os

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def mel_filters(n_mels: int) -> np.ndarray:
    assert n_mels in (80, 128), f"Unsupported n_mels: {n_mels}"
    with np.load(os.path.join(FIXTURES, "mel_filters.npz")) as f:
        return f[f"mel_{n_mels}"]


def hann_window(n: int) -> np.ndarray:
    """torch.hann_window(n), periodic=True."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def stft_power(audio: np.ndarray, n_fft: int = N_FFT, hop: int = HOP_LENGTH) -> np.ndarray:
    """|torch.stft(center=True, pad_mode="reflect")|^2 without its last frame: [bins, frames]."""
    pad = n_fft // 2
    padded = np.pad(audio.astype(np.float64), (pad, pad), mode="reflect")
    frames = 1 + (len(padded) - n_fft) // hop
    index = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    spectrum = np.fft.rfft(padded[index] * hann_window(n_fft)[None, :], axis=1)
    return (np.abs(spectrum) ** 2).T[:, :-1]


def log_mel_spectrogram(audio, n_mels: int = 80, padding: int = 0) -> np.ndarray:
    """[n_mels, len(audio) // 160] float64, as whisper.log_mel_spectrogram computes it."""
    audio = np.asarray(audio, dtype=np.float64)
    if padding > 0:
        audio = np.pad(audio, (0, padding))
    magnitudes = stft_power(audio)
    mel_spec = mel_filters(n_mels).astype(np.float64) @ magnitudes
    log_spec = np.log10(np.maximum(mel_spec, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0
