"""The log_mel_spectrogram op on the cpu device against the numpy transcription of
openai-whisper's log_mel_spectrogram (whisper_reference.py, Whisper's own mel_filters.npz):
within 1e-4 absolute on speech, noise, tones, silence and 30 s windows; its rules' errors."""
import numpy as np
import pytest

import gpukit
import whisper_reference

TOLERANCE = 1e-4


def _op(samples, runtime, **attrs):
    x = gpukit.asarray(np.ascontiguousarray(samples, dtype=np.float32),
                       device=runtime.device("cpu"))
    return gpukit.call("log_mel_spectrogram", [x], attrs).to_numpy(copy=True)


def _assert_matches(got, samples, n_mels):
    want = whisper_reference.log_mel_spectrogram(samples, n_mels)
    assert got.shape == want.shape == (n_mels, len(samples) // 160)
    error = np.max(np.abs(got.astype(np.float64) - want))
    assert error <= TOLERANCE, f"max |op - whisper| = {error:.3g}"
    return error


@pytest.mark.parametrize("n_mels", [80, 128])
def test_speech_matches_whisper(speech, cpu_runtime, n_mels):
    for path, rate, text, _voice in speech:
        if rate != 22050:
            continue
        samples = gpukit.asr.load_audio(path, runtime=cpu_runtime)
        got = gpukit.asr.log_mel_spectrogram(samples, n_mels, runtime=cpu_runtime)
        _assert_matches(got, samples, n_mels)


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("length", [201, 400, 1601, 16000, 48123])
def test_noise_and_odd_lengths_match_whisper(cpu_runtime, n_mels, length):
    rng = np.random.default_rng(length + n_mels)
    samples = (0.1 * rng.standard_normal(length)).astype(np.float32)
    _assert_matches(_op(samples, cpu_runtime, n_mels=n_mels), samples, n_mels)


def test_thirty_second_window_with_whisper_padding(cpu_runtime):
    """What Whisper feeds its encoder: a 30 s window (padding=N_SAMPLES), 3000 frames."""
    rng = np.random.default_rng(3)
    t = np.arange(5 * 16000) / 16000.0
    samples = (0.3 * np.sin(2 * np.pi * 300 * t) + 0.01 * rng.standard_normal(len(t)))
    samples = samples.astype(np.float32)
    got = gpukit.asr.log_mel_spectrogram(samples, 80, padding=480000, runtime=cpu_runtime)
    want = whisper_reference.log_mel_spectrogram(samples, 80, padding=480000)
    assert got.shape == want.shape == (80, 3500)
    assert np.max(np.abs(got - want)) <= TOLERANCE


def test_silence_is_the_floor(cpu_runtime):
    """All zeros: every power is below 1e-10, so every value is (log10(1e-10) + 4) / 4."""
    got = _op(np.zeros(3200, np.float32), cpu_runtime)
    np.testing.assert_array_equal(got, np.full((80, 20), -1.5, np.float32))


def test_tone_lands_in_its_mel_band(cpu_runtime):
    t = np.arange(16000) / 16000.0
    samples = (0.5 * np.sin(2 * np.pi * 1000.0 * t)).astype(np.float32)
    got = _op(samples, cpu_runtime)
    _assert_matches(got, samples, 80)
    filters = whisper_reference.mel_filters(80)
    expected_band = int(np.argmax(filters[:, 25]))  # 1000 Hz = bin 25 of 201 (40 Hz apart)
    assert int(np.argmax(got[:, 50])) == expected_band


def test_batch_rows_are_independent_spectrograms(cpu_runtime):
    rng = np.random.default_rng(11)
    a = (0.2 * rng.standard_normal(8000)).astype(np.float32)
    b = (0.001 * rng.standard_normal(8000)).astype(np.float32)
    got = _op(np.stack([a, b]), cpu_runtime, n_mels=80)
    assert got.shape == (2, 80, 50)
    _assert_matches(got[0], a, 80)
    _assert_matches(got[1], b, 80)


def test_strided_input_matches_contiguous(cpu_runtime):
    rng = np.random.default_rng(5)
    wide = (0.1 * rng.standard_normal((2, 6400))).astype(np.float32)
    x = gpukit.asarray(wide, device=cpu_runtime.device("cpu"))[:, ::2]
    got = gpukit.call("log_mel_spectrogram", [x], {}).to_numpy(copy=True)
    _assert_matches(got[1], wide[1, ::2], 80)


def test_rules_refuse_bad_calls_with_their_reason(cpu_runtime):
    dev = cpu_runtime.device("cpu")
    ok = gpukit.asarray(np.zeros(1600, np.float32), device=dev)
    with pytest.raises(gpukit.InvalidArgument, match="n_mels.*is 0; expected 1..512"):
        gpukit.call("log_mel_spectrogram", [ok], {"n_mels": 0})
    with pytest.raises(gpukit.InvalidArgument, match="n_fft.*is 401; expected an even value"):
        gpukit.call("log_mel_spectrogram", [ok], {"n_fft": 401})
    with pytest.raises(gpukit.InvalidArgument, match="hop_length.*is 500; expected 1..n_fft"):
        gpukit.call("log_mel_spectrogram", [ok], {"hop_length": 500})
    short = gpukit.asarray(np.zeros(200, np.float32), device=dev)
    with pytest.raises(gpukit.InvalidArgument, match="200 samples; at least 201 needed"):
        gpukit.call("log_mel_spectrogram", [short], {})
    f64 = gpukit.asarray(np.zeros(1600, np.float64), device=dev)
    with pytest.raises(gpukit.InvalidArgument, match="f32"):
        gpukit.call("log_mel_spectrogram", [f64], {})
    cube = gpukit.asarray(np.zeros((1, 1, 1600), np.float32), device=dev)
    with pytest.raises(gpukit.InvalidArgument, match=r"expected \[samples\] or \[batch"):
        gpukit.call("log_mel_spectrogram", [cube], {})
