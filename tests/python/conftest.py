"""pytest setup: use an installed gpukit, else the checkout's bindings/python against a CMake
build tree (GPUKIT_LIBRARY=/path/to/build/lib/libgpukit.so, or ./build/lib found by itself)."""
import os
import sys

import pytest

os.environ.setdefault("GPUKIT_LOG_LEVEL", "warning")
try:
    import gpukit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
    import gpukit  # noqa: F401


@pytest.fixture
def dev():
    """The cpu device of a runtime of its own, with a 64 MiB memory budget (scheduler tests)."""
    rt = gpukit.Runtime(devices="cpu")
    d = rt.device("cpu")
    d.set_memory_budget("64MiB")
    return d
