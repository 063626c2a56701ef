"""Speech recognition's front end, thin over the C ABI (gpukit_audio.h, ABI 1.9; docs/asr.md).

    samples = gpukit.asr.load_audio("speech.flac")        # mono float32 at 16 kHz
    mel = gpukit.asr.log_mel_spectrogram(samples, n_mels=80)  # [80, frames], Whisper's features

Files are decoded by libsndfile (WAV, FLAC, Ogg Vorbis/Opus, …) and resampled by libsoxr;
channels are averaged down to mono.
"""
from __future__ import annotations

import os

import numpy as np

from ._lib import check, ffi, lib
from ._runtime import _default_runtime

__all__ = ["SAMPLE_RATE", "N_FFT", "HOP_LENGTH", "load_audio", "log_mel_spectrogram"]

#: Whisper's parameters: 16 kHz audio, 400-sample (25 ms) windows every 160 samples (10 ms).
SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160


def _tensor_to_numpy(tensor) -> np.ndarray:
    """Copies a contiguous f32 tensor on the cpu device into a new array and releases it."""
    try:
        desc = ffi.new("gk_tensor_desc*")
        desc.struct_size = ffi.sizeof("gk_tensor_desc")
        check(lib.gk_tensor_get_desc(tensor, desc))
        shape = tuple(int(desc.shape[i]) for i in range(desc.ndim))
        out = np.empty(shape, dtype=np.float32)
        check(lib.gk_copy_to_host(tensor, ffi.from_buffer("float[]", out), out.nbytes, ffi.NULL))
        return out
    finally:
        lib.gk_tensor_release(tensor)


def load_audio(source, sr: int = SAMPLE_RATE, *, source_sr: int | None = None,
               runtime=None) -> np.ndarray:
    """Mono float32 samples at `sr` Hz (sr=None keeps the source's rate).

    `source` is a path (str or os.PathLike) to a sound file, or an array of samples:
    1-D (mono) or 2-D [frames, channels] (the layout soundfile and librosa's mono=False
    transposed give), at `source_sr` Hz (default: `sr`, so no resampling). A missing file
    raises gpukit.NotFound; a corrupt or unsupported one gpukit.InvalidArgument naming the file
    and the reason."""
    rt = runtime or _default_runtime()
    target = 0 if sr is None else int(sr)
    out = ffi.new("gk_tensor**")
    if isinstance(source, (str, bytes, os.PathLike)):
        source_rate = ffi.new("int32_t*")
        check(lib.gk_audio_load(rt.ptr, os.fsencode(os.fspath(source)), target, source_rate,
                                out))
        return _tensor_to_numpy(out[0])
    samples = np.asarray(source)
    if samples.ndim not in (1, 2):
        raise ValueError(f"audio array has shape {samples.shape}; expected [samples] or "
                         "[frames, channels]")
    if not np.issubdtype(samples.dtype, np.floating):
        raise TypeError(f"audio array has dtype {samples.dtype}; expected a float dtype "
                        "(scale integer PCM first: int16 / 32768)")
    if source_sr is None:
        if sr is None:
            raise ValueError("an audio array needs source_sr (its sample rate) when sr=None")
        source_sr = sr
    frames = samples.shape[0]
    channels = 1 if samples.ndim == 1 else samples.shape[1]
    data = np.ascontiguousarray(samples, dtype=np.float32)
    buf = ffi.from_buffer("float[]", data) if data.size else ffi.new("float[]", 1)
    check(lib.gk_audio_from_samples(rt.ptr, buf, frames, channels, int(source_sr), target, out))
    return _tensor_to_numpy(out[0])


def log_mel_spectrogram(audio, n_mels: int = 80, *, padding: int = 0, device=None,
                        runtime=None) -> np.ndarray:
    """Whisper's log-mel features of 16 kHz mono float32 `audio` ([samples], or [batch,
    samples] for one spectrogram per row) through the `log_mel_spectrogram` op on `device`
    (default: the runtime's default device): float32 [n_mels, samples // 160] (or [batch,
    n_mels, frames]). `padding` zero samples are appended first, as whisper's `padding`
    does. A path is loaded with load_audio first."""
    from ._array import asarray, call  # here: _array imports this package's runtime first

    if isinstance(audio, (str, bytes, os.PathLike)):
        audio = load_audio(audio, runtime=runtime)
    samples = np.asarray(audio, dtype=np.float32)
    if padding > 0:
        pad = [(0, 0)] * (samples.ndim - 1) + [(0, int(padding))]
        samples = np.pad(samples, pad)
    if runtime is not None and device is None:
        device = runtime.default_device()
    x = asarray(np.ascontiguousarray(samples), device=device)
    return call("log_mel_spectrogram", [x], {"n_mels": int(n_mels)}).to_numpy(copy=True)
