"""pytest setup for tests/llm: an installed gpukit, else the checkout's bindings/python (as
tests/python/conftest.py does, so tests/llm also runs on its own); and the golden models'
weights, which are not stored: golden_weights.py writes each golden/<name>/model.safetensors
from its weights.json. Done here, when pytest loads this file, so that it precedes the
collection of any test that reads them."""
import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import gpukit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

sys.path.insert(0, HERE)
import golden_weights  # noqa: E402

golden_weights.ensure()
