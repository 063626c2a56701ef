"""Speech recognition, thin over the C ABI (gpukit_audio.h, ABI 1.9; gpukit_asr.h, ABI 1.12;
docs/asr.md).

    samples = gpukit.asr.load_audio("speech.flac")        # mono float32 at 16 kHz
    mel = gpukit.asr.log_mel_spectrogram(samples, n_mels=80)  # [80, frames], Whisper's features
    model = gpukit.asr.load("whisper-tiny.en")             # an HF Whisper folder
    result = model.transcribe("speech.flac")              # .text, .language, .segments

Files are decoded by libsndfile (WAV, FLAC, Ogg Vorbis/Opus, …) and resampled by libsoxr;
channels are averaged down to mono.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ._call import call
from ._creation import asarray
from ._lib import check, ffi, lib
from ._runtime import _default_runtime

__all__ = ["SAMPLE_RATE", "N_FFT", "HOP_LENGTH", "WHISPER_TEMPERATURES", "load_audio",
           "log_mel_spectrogram", "load", "WhisperModel", "Transcript", "Segment"]

#: Whisper's parameters: 16 kHz audio, 400-sample (25 ms) windows every 160 samples (10 ms).
SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
#: openai-whisper's transcribe() default: greedy (or beam) at 0, then fallback by 0.2 up to 1.0.
WHISPER_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def _temperature_schedule(temperature, increment) -> tuple:
    """(start, step) of gk_transcribe_options for transcribe's `temperature` (a float or
    Whisper's sequence) and `temperature_increment` (None: taken from the sequence)."""
    if isinstance(temperature, (int, float, np.floating, np.integer)):
        return float(temperature), 0.0 if increment is None else float(increment)
    values = [float(t) for t in temperature]
    if increment is not None:
        raise ValueError(f"temperature={tuple(values)} is a sequence, which carries its own "
                         f"step; give temperature_increment={increment!r} with a single "
                         "starting temperature instead")
    if not values:
        raise ValueError("temperature=() is empty; give a temperature or a sequence of them")
    if len(values) == 1:
        return values[0], 0.0
    start, step = values[0], (values[-1] - values[0]) / (len(values) - 1)
    even = all(abs(t - (start + i * step)) <= 1e-6 for i, t in enumerate(values))
    if not (even and step > 0 and values[-1] <= 1.0 + 1e-6 and values[-1] + step > 1.0 + 1e-6):
        raise ValueError(
            f"temperature={tuple(values)}: the C ABI takes a start and a step (fallback at "
            "start, start + step, ... up to 1.0), so a sequence must be evenly spaced, "
            "increasing and run to the last step before 1.0 is passed, as Whisper's "
            f"{WHISPER_TEMPERATURES}; or give a single temperature with temperature_increment")
    return start, step


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


class WhisperModel:
    """A Whisper model (gk_model with an encoder). Made by gpukit.asr.load."""

    def __init__(self, path, device=None, dtype=None, *, runtime=None):
        from .llm import Model
        self._model = Model(path, device=device, dtype=dtype, runtime=runtime)
        info = ffi.new("gk_encoder_info*")
        info.struct_size = ffi.sizeof("gk_encoder_info")
        check(lib.gk_model_get_encoder_info(self._model._ptr, info))
        if info.n_mels == 0:
            raise ValueError(f"{os.fspath(path)} is a {self._model.architecture}, not a Whisper "
                             "model (it has no encoder)")
        self.n_mels = int(info.n_mels)
        self.max_frames = int(info.max_frames)
        self.hidden_size = self._model.hidden_size
        self.vocab_size = self._model.vocab_size
        self.device = self._model.device
        self.dtype = self._model.dtype
        self.path = self._model.path

    def __repr__(self) -> str:
        m = self._model
        return (f"<gpukit.asr.WhisperModel {m.num_layers} decoder layers, d_model "
                f"{self.hidden_size}, {self.n_mels} mels, {self.dtype} on {self.device.name}>")

    def _features(self, mel) -> np.ndarray:
        mel = np.ascontiguousarray(mel, dtype=np.float32)
        if mel.ndim != 2 or mel.shape[0] != self.n_mels:
            raise ValueError(f"mel has shape {mel.shape}; the model takes [{self.n_mels}, "
                             f"frames] with 1 <= frames <= {self.max_frames}")
        return mel

    def _session(self, mel, out=None):
        """A decoder session whose audio is `mel` (encoded now)."""
        mel = self._features(mel)
        session = self._model.session()
        buf = ffi.from_buffer("float[]", out) if out is not None else ffi.NULL
        check(lib.gk_session_encode(session._ptr, ffi.from_buffer("float[]", mel),
                                    mel.shape[0], mel.shape[1], buf))
        return session

    def encode(self, mel) -> np.ndarray:
        """The encoder's output for log-mel features `mel` [n_mels, frames] (frames up to
        3000, one 30 s window): float32 [(frames + 1) // 2, d_model]."""
        mel = self._features(mel)
        out = np.empty(((mel.shape[1] + 1) // 2, self.hidden_size), dtype=np.float32)
        self._session(mel, out)
        return out

    def transcribe(self, audio, language=None, beam_size: int | None = 1,
                   temperature=WHISPER_TEMPERATURES, *, temperature_increment=None,
                   best_of: int | None = 5, compression_ratio_threshold: float | None = 2.4,
                   logprob_threshold: float | None = -1.0,
                   no_speech_threshold: float | None = 0.6,
                   condition_on_previous_text: bool = True, without_timestamps: bool = False,
                   batch_size: int = 1, seed: int = 0, on_segment=None) -> "Transcript":
        """Transcribes `audio` (a sound file's path, or 16 kHz mono float samples) over 30 s
        windows as openai-whisper's transcribe() does (gk_asr_transcribe): a Transcript with
        .text, .language and .segments (each .start, .end in seconds, .text, .avg_logprob,
        .no_speech_prob, .tokens). The options keep Whisper's names and defaults:

        - `language`: None is the model's (detected by a multilingual model).
        - `beam_size`: at temperature 0, 1 (or None) is greedy, N > 1 beam search.
        - `temperature`: a float (that temperature alone, no fallback) or Whisper's increasing,
          evenly spaced sequence, default (0.0, 0.2, 0.4, 0.6, 0.8, 1.0): a window whose text
          fails a threshold below is decoded again at the next one. The C ABI takes a start
          and a step up to 1.0, so a sequence must be t0, t0 + s, … up to its last value <= 1.0
          with no room for another step; others raise ValueError. `temperature_increment`
          gives the step directly with a float temperature (0: no fallback).
        - `best_of`: candidates sampled per window at a temperature > 0, the likeliest kept.
        - `compression_ratio_threshold`: fall back when the text's zlib compression ratio is
          above it (too repetitive); None never does.
        - `logprob_threshold`: fall back when the average log-probability is below it; None
          never does, and then no window is skipped as silent either (Whisper's None keeps the
          no-speech skip on `no_speech_threshold` alone; the C ABI cannot say that).
        - `no_speech_threshold`: a window whose no-speech probability is above it and whose
          average log-probability is below `logprob_threshold` gives no text; None: never.
        - `condition_on_previous_text`: False stops prompting each window with the text
          before it.
        - `without_timestamps`: one segment per window, no timestamp tokens.
        - `batch_size`: N > 1 splits the audio at its quietest moments into up to N parts of
          about 30 s or more, transcribed side by side (one forward pass per step over all).
        - `seed`: sampling at a temperature > 0 repeats with the same seed.

        The C side checks the ranges and names the option it refuses (gpukit.InvalidArgument).
        `on_segment(segment)` is called as each segment is found; a true return stops the
        transcription there."""
        start, step = _temperature_schedule(temperature, temperature_increment)
        rt = self.device.runtime
        tensor = ffi.new("gk_tensor**")
        if isinstance(audio, (str, bytes, os.PathLike)):
            check(lib.gk_audio_load(rt.ptr, os.fsencode(os.fspath(audio)), SAMPLE_RATE,
                                    ffi.NULL, tensor))
        else:
            samples = np.ascontiguousarray(audio, dtype=np.float32)
            if samples.ndim != 1:
                raise ValueError(f"audio array has shape {samples.shape}; expected 1-D 16 kHz "
                                 "mono samples (gpukit.asr.load_audio converts others)")
            buf = ffi.from_buffer("float[]", samples) if samples.size else ffi.new("float[]", 1)
            check(lib.gk_audio_from_samples(rt.ptr, buf, samples.size, 1, SAMPLE_RATE,
                                            SAMPLE_RATE, tensor))
        audio_tensor = ffi.gc(tensor[0], lib.gk_tensor_release)
        opts = ffi.new("gk_transcribe_options*")
        opts.struct_size = ffi.sizeof("gk_transcribe_options")
        lang = ffi.new("char[]", language.encode()) if language else ffi.NULL
        opts.language = lang
        opts.beam_size = 0 if beam_size is None else int(beam_size)
        opts.temperature = start
        opts.temperature_increment = step
        opts.best_of = 0 if best_of is None else int(best_of)
        opts.compression_ratio_threshold = (0.0 if compression_ratio_threshold is None
                                            else float(compression_ratio_threshold))
        opts.logprob_threshold = (-math.inf if logprob_threshold is None
                                  else float(logprob_threshold))
        # A probability is never above 1: None never skips a window as silent.
        opts.no_speech_threshold = (1.0 if no_speech_threshold is None
                                    else float(no_speech_threshold))
        opts.without_previous_text = 0 if condition_on_previous_text else 1
        opts.without_timestamps = 1 if without_timestamps else 0
        opts.batch_size = int(batch_size)
        opts.seed = int(seed) & (2**64 - 1)
        errors = []
        if on_segment is not None:
            @ffi.callback("int32_t(void*, const gk_transcript_segment*)")
            def callback(_user, seg):
                try:
                    return 1 if on_segment(Segment._from_c(seg)) else 0
                except BaseException as e:  # noqa: BLE001 (re-raised after the C call)
                    errors.append(e)
                    return 1
            opts.on_segment = callback
        out = ffi.new("gk_transcript**")
        check(lib.gk_asr_transcribe(self._model._ptr, audio_tensor, opts, out))
        transcript = ffi.gc(out[0], lib.gk_transcript_release)
        if errors:
            raise errors[0]
        return Transcript._from_c(transcript)

    def logits(self, mel, tokens) -> np.ndarray:
        """The decoder's logits for `tokens` (e.g. [<|startoftranscript|>, …]) over the audio
        `mel` [n_mels, frames]: float32 [len(tokens), vocab], row i predicting token i + 1."""
        session = self._session(mel)
        return session.step(list(tokens), all_logits=True)


class Segment:
    """One segment of a transcript: .start and .end (seconds), .text, .avg_logprob,
    .no_speech_prob and .tokens (its text token ids)."""

    __slots__ = ("start", "end", "text", "avg_logprob", "no_speech_prob", "tokens")

    def __init__(self, start, end, text, avg_logprob, no_speech_prob, tokens):
        self.start = start
        self.end = end
        self.text = text
        self.avg_logprob = avg_logprob
        self.no_speech_prob = no_speech_prob
        self.tokens = tokens

    @classmethod
    def _from_c(cls, s) -> "Segment":
        return cls(float(s.start), float(s.end), ffi.string(s.text).decode("utf-8", "replace"),
                   float(s.avg_logprob), float(s.no_speech_prob),
                   [int(s.tokens[i]) for i in range(s.num_tokens)])

    def __repr__(self) -> str:
        return f"<Segment [{self.start:.2f} --> {self.end:.2f}]{self.text!r}>"


class Transcript:
    """What WhisperModel.transcribe returns: .text (the segments' texts joined), .language
    and .segments (a list of Segment)."""

    def __init__(self, text: str, language: str, segments):
        self.text = text
        self.language = language
        self.segments = segments

    @classmethod
    def _from_c(cls, t) -> "Transcript":
        segments = []
        for i in range(lib.gk_transcript_num_segments(t)):
            seg = ffi.new("gk_transcript_segment*")
            seg.struct_size = ffi.sizeof("gk_transcript_segment")
            check(lib.gk_transcript_segment_at(t, i, seg))
            segments.append(Segment._from_c(seg))
        return cls(ffi.string(lib.gk_transcript_text(t)).decode("utf-8", "replace"),
                   ffi.string(lib.gk_transcript_language(t)).decode(), segments)

    def __repr__(self) -> str:
        return f"<Transcript {self.language} {len(self.segments)} segments: {self.text!r}>"


def load(path, device=None, dtype=None, *, runtime=None) -> WhisperModel:
    """Loads the Whisper model in the HF folder `path` (config.json, model.safetensors,
    tokenizer.json, generation_config.json; tools/convert_whisper_ct2.py writes one) onto
    `device` (default: the runtime's default device) in `dtype` ("f32" (default), "f16",
    "bf16"). A folder of another architecture raises ValueError."""
    return WhisperModel(path, device=device, dtype=dtype, runtime=runtime)
