#!/usr/bin/env bash
# Fills the two ignored folders that travel to the GPU machine with every run of
# perf/run_gpu.sh (the device tool's `carry`): .deps/ holds the Debian packages the GPU
# image lacks (CLI11, nlohmann-json, OpenBLAS, PCRE2; libsndfile with the codec libraries it
# links, libsoxr and FFTW for the asr family's audio in and features), which run_gpu.sh
# unpacks into a private prefix; .whl/ holds cffi for the image's Python 3.12, which it
# installs into a private site folder. Run once on this machine (Debian 12, network to its mirrors and PyPI);
# safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps .whl
# PCRE2 (the tokenizer's pre-tokenizer patterns): the -dev package and the libraries its
# pkg-config file names.
if ! compgen -G ".deps/libcli11-dev_*.deb" > /dev/null || \
   ! compgen -G ".deps/libpcre2-dev_*.deb" > /dev/null || \
   ! compgen -G ".deps/libsndfile1-dev_*.deb" > /dev/null; then
  apt-get update -qq
  (cd .deps && apt-get download libcli11-dev nlohmann-json3-dev libopenblas-dev \
    libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5 \
    libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
    libsndfile1-dev libsndfile1 libflac12 libmp3lame0 libmpg123-0 libogg0 libopus0 \
    libvorbis0a libvorbisenc2 libsoxr-dev libsoxr0 libfftw3-dev libfftw3-double3)
fi
# openai-whisper's sdist: tests/asr/check_whisper_torch.py loads its audio.py (run_gpu.sh asr).
if ! compgen -G ".whl/openai_whisper-*.tar.gz" > /dev/null; then
  python3 -m pip download -q --no-deps --no-binary=:all: -d .whl openai-whisper==20250625
fi
# The espeak-ng sentences of perf/asr/bench_transcribe.py (the GPU image has no espeak-ng).
if [ ! -d .deps/asr-speech ] && command -v espeak-ng > /dev/null; then
  python3 tests/asr/whisper_eval.py speak .deps/asr-speech > /dev/null
fi
if ! compgen -G ".whl/cffi-*.whl" > /dev/null; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl cffi pycparser
fi
ls .deps .whl
