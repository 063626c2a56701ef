#!/usr/bin/env bash
# Checks and times the matmul plugins on the GPU machine in one call; logs go to $OUT.
# Expects the plugins and tests/gpu/matmul/matmul_check built beside it in $1 (default
# build-mm-dev): build them on any x86-64 machine with CUDA 13 (see docs/kernels/matmul.md),
# or here, where the binary is rebuilt with nvcc if the carried one does not start.
set -o pipefail
dir=${1:-build-mm-dev}
out=${OUT:-/tmp/matmul_out}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
if ! "$dir/matmul_check" --no-check --no-bench >/dev/null 2>&1; then
  echo "rebuilding matmul_check here"
  nvcc -std=c++17 -O2 -I abi/include -Xcompiler -fopenmp tests/gpu/matmul/matmul_check.cu \
    -lcublas -ldl -lgomp -o "$dir/matmul_check" || exit 1
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass "$dir/libgpukit_matmul_sm90.so" > "$out/sm90.sass" 2>&1
  echo "sm90 SASS: $(grep -c HGMMA "$out/sm90.sass") HGMMA, $(grep -c UTMALDG "$out/sm90.sass") UTMALDG, $(grep -c 'LDL\|STL' "$out/sm90.sass") LDL/STL"
fi
lib() { echo "$dir/libgpukit_$1.so"; }
# Each plugin's check in its own process, so a hang or fault in one leaves the others' logs.
for p in cublaslt matmul_sm80 matmul_sm90; do
  timeout 240 "$dir/matmul_check" --no-bench "$(lib $p)" > "$out/check_$p.log" 2>&1
  echo "check $p: exit $? — $(grep -c ' ok' "$out/check_$p.log") ok, $(grep -c 'FAIL' "$out/check_$p.log") FAIL, $(grep -c declined "$out/check_$p.log") declined"
  grep -E "FAIL|FATAL" "$out/check_$p.log" | head -8
done
timeout 300 "$dir/matmul_check" --no-check "$(lib matmul_sm90)" "$(lib cublaslt)" \
  "$(lib matmul_sm80)" 2>&1 | tee "$out/bench.log"
