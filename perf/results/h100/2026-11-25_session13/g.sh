#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
t0=$SECONDS
cmake -G Ninja -S .probe/var -B /tmp/v -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
  -DGPUKIT_BUILD_EXAMPLES=OFF -DGPUKIT_BUILD_TESTS=OFF > /tmp/cfg.log 2>&1 || tail -5 /tmp/cfg.log
cmake --build /tmp/v -j 16 --target gpukit gpukit_reductions_cuda gpukit_compiled_call > /tmp/build.log 2>&1 || grep -E "error" -A3 /tmp/build.log | head -20
echo "build $((SECONDS-t0)) s"
cd .probe/var && export GPUKIT_LIBRARY=/tmp/v/lib/libgpukit.so PYTHONPATH=/tmp/v/lib/gpukit/python:$PWD/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error
for r in 1 2; do python3 ../s13/colvar.py 2>&1 | grep -v -i deprec; GK_COL_PIN=1 python3 ../s13/colvar.py 2>&1 | grep -v -i deprec; done | tee $OUT/colvar.txt
echo "total $((SECONDS-t0)) s"
