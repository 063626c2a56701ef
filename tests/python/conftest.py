"""pytest setup: use an installed gpukit, else the checkout's bindings/python against a CMake
build tree (GPUKIT_LIBRARY=/path/to/build/lib/libgpukit.so, or ./build/lib found by itself)."""
import os
import sys

os.environ.setdefault("GPUKIT_LOG_LEVEL", "warning")
try:
    import gpukit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
    import gpukit  # noqa: F401
