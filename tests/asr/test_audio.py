"""Audio in (gpukit.asr.load_audio over gk_audio_load / gk_audio_from_samples): decoding
WAV/FLAC/Ogg through libsndfile, libsoxr's resampling, the stereo mix-down, and the errors."""
import os
import pathlib

import numpy as np
import pytest

import gpukit
import make_speech


def _tone(samples, rate):
    """(frequency, amplitude) of the strongest sinusoid in the middle of `samples`: the
    Hann-windowed spectral peak refined by quadratic interpolation of its log magnitude,
    and the amplitude from the RMS (a pure sine's is amplitude / sqrt(2))."""
    middle = samples[len(samples) // 4: 3 * len(samples) // 4].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle))))
    k = int(np.argmax(spectrum[1:-1])) + 1
    a, b, c = np.log(spectrum[k - 1:k + 2])
    offset = 0.5 * (a - c) / (a - 2 * b + c)
    frequency = (k + offset) * rate / len(middle)
    return frequency, np.sqrt(2.0) * np.sqrt(np.mean(middle ** 2))


@pytest.mark.parametrize("rate", [8000, 11025, 22050, 44100, 48000])
@pytest.mark.parametrize("frequency", [440.0, 3000.0])
def test_resampled_sine_keeps_frequency_and_amplitude(tmp_path, cpu_runtime, rate, frequency):
    path = make_speech.write_sound(str(tmp_path / f"sine_{rate}.wav"),
                                   make_speech.sine(frequency, rate, 2.0, 0.5), rate, "wav-float")
    source_rate_samples = gpukit.asr.load_audio(path, sr=None, runtime=cpu_runtime)
    assert len(source_rate_samples) == 2 * rate
    out = gpukit.asr.load_audio(path, sr=16000, runtime=cpu_runtime)
    assert out.dtype == np.float32 and out.ndim == 1
    assert abs(len(out) - 32000) <= 1
    got_frequency, got_amplitude = _tone(out, 16000)
    assert got_frequency == pytest.approx(frequency, rel=1e-3)
    assert got_amplitude == pytest.approx(0.5, rel=5e-3)
    # Away from the edges, the samples are the sine itself at the new rate.
    t = np.arange(len(out)) / 16000.0
    expected = 0.5 * np.sin(2 * np.pi * frequency * t)
    middle = slice(1000, len(out) - 1000)
    assert np.max(np.abs(out[middle] - expected[middle])) < 2e-3


def test_stereo_is_averaged_to_mono(tmp_path, cpu_runtime):
    left = make_speech.sine(440.0, 16000, 1.0, 0.5)
    right = make_speech.sine(1000.0, 16000, 1.0, 0.25)
    path = make_speech.write_sound(str(tmp_path / "stereo.wav"), np.stack([left, right], 1),
                                   16000, "wav-float")
    out = gpukit.asr.load_audio(path, runtime=cpu_runtime)
    np.testing.assert_allclose(out, (left + right) / 2, atol=1e-7)


def test_flac_decodes_to_the_same_samples_as_pcm16_wav(tmp_path, cpu_runtime):
    rng = np.random.default_rng(7)
    samples = (rng.integers(-20000, 20000, 8000) / 32768.0).astype(np.float32)
    wav = make_speech.write_sound(str(tmp_path / "noise.wav"), samples, 16000, "wav")
    flac = make_speech.write_sound(str(tmp_path / "noise.flac"), samples, 16000, "flac")
    from_wav = gpukit.asr.load_audio(wav, runtime=cpu_runtime)
    from_flac = gpukit.asr.load_audio(flac, runtime=cpu_runtime)
    np.testing.assert_array_equal(from_flac, from_wav)
    # libsndfile writes float * 32767 and reads int / 32768: within one 16-bit step.
    np.testing.assert_allclose(from_wav, samples, atol=1.5 / 32768, rtol=0)


def test_ogg_vorbis_decodes_the_tone(tmp_path, cpu_runtime):
    path = make_speech.write_sound(str(tmp_path / "tone.ogg"),
                                   make_speech.sine(1000.0, 44100, 1.0, 0.5), 44100, "ogg")
    out = gpukit.asr.load_audio(path, runtime=cpu_runtime)
    assert abs(len(out) - 16000) <= 2
    frequency, amplitude = _tone(out, 16000)
    assert frequency == pytest.approx(1000.0, rel=1e-3)
    assert amplitude == pytest.approx(0.5, rel=0.05)


def _low_pass(x, hz, rate=16000):
    spectrum = np.fft.rfft(x.astype(np.float64))
    spectrum[np.fft.rfftfreq(len(x), 1.0 / rate) > hz] = 0
    return np.fft.irfft(spectrum, len(x))


def _relative_rms(a, b):
    middle = slice(800, len(b) - 800)  # away from the edges, where each resampler pads
    return np.sqrt(np.mean((a[middle] - b[middle]) ** 2) / np.mean(b[middle] ** 2))


def test_speech_resampled_from_every_rate_agrees(speech, cpu_runtime):
    """Sentences made at 8, 16, 22.05 and 44.1 kHz (exact FFT resampling of espeak-ng's
    22.05 kHz) come out at 16 kHz with the length of the 16 kHz one, and equal numpy's exact
    band-limited resampling of the same file below 7 kHz (libsoxr's passband ends at 91% of
    the lower Nyquist frequency: 3.64 kHz for the 8 kHz file, so it is compared below 3.5)."""
    by_sentence = {}
    for path, rate, text, _voice in speech:
        by_sentence.setdefault(text, {})[rate] = path
    for text, paths in by_sentence.items():
        reference = gpukit.asr.load_audio(paths[16000], runtime=cpu_runtime)
        for rate, band in ((8000, 3500), (22050, 7000), (44100, 7000)):
            source, source_rate = make_speech.read_wav16(paths[rate])
            assert source_rate == rate
            out = gpukit.asr.load_audio(paths[rate], runtime=cpu_runtime)
            assert len(out) == len(reference), (text, rate)
            exact = make_speech.resample_fft(source, rate, 16000)
            error = _relative_rms(_low_pass(out, band), _low_pass(exact, band))
            assert error < 2e-3, (text, rate, error)


def test_arrays_mono_and_stereo(cpu_runtime):
    left = make_speech.sine(440.0, 48000, 1.0, 0.5)
    right = make_speech.sine(440.0, 48000, 1.0, 0.3)
    mono = gpukit.asr.load_audio(left, sr=None, source_sr=48000, runtime=cpu_runtime)
    np.testing.assert_array_equal(mono, left)
    mixed = gpukit.asr.load_audio(np.stack([left, right], 1), source_sr=48000,
                                  runtime=cpu_runtime)
    assert len(mixed) == 16000
    frequency, amplitude = _tone(mixed, 16000)
    assert frequency == pytest.approx(440.0, rel=1e-3)
    assert amplitude == pytest.approx(0.4, rel=5e-3)
    same = gpukit.asr.load_audio(left.astype(np.float64), sr=48000, runtime=cpu_runtime)
    np.testing.assert_array_equal(same, left)


def test_missing_file_is_not_found_naming_it(tmp_path, cpu_runtime):
    path = str(tmp_path / "nowhere.wav")
    with pytest.raises(gpukit.NotFound, match="nowhere.wav.*no such file"):
        gpukit.asr.load_audio(path, runtime=cpu_runtime)


@pytest.mark.parametrize("content", [b"", b"RIFF\x10\x00\x00\x00WAVEfmt ", b"not audio at all",
                                     b"fLaC\x00\x00\x00\x22" + bytes(40)])
def test_corrupt_files_are_refused_naming_them(tmp_path, cpu_runtime, content):
    path = tmp_path / "broken.wav"
    path.write_bytes(content)
    with pytest.raises(gpukit.InvalidArgument, match="audio file '.*broken.wav'"):
        gpukit.asr.load_audio(str(path), runtime=cpu_runtime)


def test_truncated_flac_is_refused_or_decodes_what_is_there(tmp_path, cpu_runtime):
    samples = make_speech.sine(440.0, 16000, 1.0, 0.5)
    full = make_speech.write_sound(str(tmp_path / "full.flac"), samples, 16000, "flac")
    data = pathlib.Path(full).read_bytes()
    cut = tmp_path / "cut.flac"
    cut.write_bytes(data[:len(data) // 2])
    try:
        out = gpukit.asr.load_audio(str(cut), runtime=cpu_runtime)
    except gpukit.InvalidArgument as e:
        assert "cut.flac" in str(e)
    else:
        assert 0 < len(out) < len(samples)
        np.testing.assert_allclose(out, samples[:len(out)], atol=1.5 / 32768, rtol=0)


def test_a_directory_is_refused(tmp_path, cpu_runtime):
    with pytest.raises(gpukit.InvalidArgument, match="is a directory"):
        gpukit.asr.load_audio(str(tmp_path), runtime=cpu_runtime)


def test_bad_arguments_name_the_problem(cpu_runtime):
    ok = np.zeros(1600, np.float32)
    with pytest.raises(gpukit.InvalidArgument, match="target_rate is -5"):
        gpukit.asr.load_audio(ok, sr=-5, source_sr=16000, runtime=cpu_runtime)
    with pytest.raises(gpukit.InvalidArgument, match="sample_rate is 0"):
        gpukit.asr.load_audio(ok, sr=16000, source_sr=0, runtime=cpu_runtime)
    with pytest.raises(gpukit.InvalidArgument, match="frames is 0"):
        gpukit.asr.load_audio(np.zeros(0, np.float32), runtime=cpu_runtime)
    bad = ok.copy()
    bad[7] = np.nan
    with pytest.raises(gpukit.InvalidArgument, match="sample 7 is NaN"):
        gpukit.asr.load_audio(bad, runtime=cpu_runtime)
    bad[7] = 3e7
    with pytest.raises(gpukit.InvalidArgument, match="sample 7 is 30000000.*within \\+-1000000"):
        gpukit.asr.load_audio(bad, runtime=cpu_runtime)
    with pytest.raises(TypeError, match="int16"):
        gpukit.asr.load_audio(np.zeros(100, np.int16), runtime=cpu_runtime)
    with pytest.raises(ValueError, match="expected \\[samples\\] or \\[frames, channels\\]"):
        gpukit.asr.load_audio(np.zeros((2, 2, 2), np.float32), runtime=cpu_runtime)
    with pytest.raises(gpukit.InvalidArgument, match="channels is 2000"):
        gpukit.asr.load_audio(np.zeros((1, 2000), np.float32), runtime=cpu_runtime)


def test_c_abi_version_is_at_least_1_9():
    version = gpukit.lib.gk_abi_version()
    assert version >> 16 == 1 and version & 0xFFFF >= 9
    assert "gpukit_audio.h" in [os.path.basename(p) for p in gpukit.HEADER_PATHS]


def test_float_file_with_a_huge_sample_is_refused_naming_it(tmp_path, cpu_runtime):
    """Float WAVs may hold any float; one far outside [-1, 1] would overflow the resampler's
    filters, so the decoder refuses it (fuzz_audio found such a file)."""
    samples = make_speech.sine(440.0, 44100, 0.1, 0.5)
    samples[100] = 1e30
    path = make_speech.write_sound(str(tmp_path / "huge.wav"), samples, 44100, "wav-float")
    with pytest.raises(gpukit.InvalidArgument, match="huge.wav'.*sample 100 is"):
        gpukit.asr.load_audio(path, runtime=cpu_runtime)
