#!/usr/bin/env bash
# Session 15, call G (H100): the var probe tree; bf16 splits on the lean kernel with the
# default minimum chunk (8192 elements) and with 32768 (64 KiB per block); f32 with 8192
# (32 KiB) and 16384 (64 KiB). Two rounds.
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/g
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/g/device.txt
cmake -G Ninja -S .probe/s15/var -B /tmp/var -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
  -DGPUKIT_BUILD_EXAMPLES=OFF > /tmp/cfg.log 2>&1 || tail -20 /tmp/cfg.log
cmake --build /tmp/var -j 16 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > /tmp/b.log 2>&1 || grep error -A3 /tmp/b.log | head -20
run() { local tag=$1 dt=$2; shift 2; ( cd .probe/s15/var && env "$@" GPUKIT_LIBRARY=/tmp/var/lib/libgpukit.so PYTHONPATH=/tmp/var/lib/gpukit/python:$ROOT/.probe/s15/var/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error python3 $ROOT/.probe/s15/sumall.py $tag red 2>&1 | grep -v -i deprecat | grep $dt | tee -a $OUT/g/sumall.txt ); }
for r in 1 2; do
  run bf_lean bfloat16 GK_SPLIT_LEAN=1
  run bf_min32k bfloat16 GK_SPLIT_LEAN=1 GK_MIN_CHUNK=32768
  run f_base float32 X=1
  run f_min16k float32 GK_MIN_CHUNK=16384
done
