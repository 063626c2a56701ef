#!/usr/bin/env bash
# Session 13, call E: reductions-only build of HEAD; paths.py (untimed-by-the-harness paths).
set -uo pipefail
export PYTHONUNBUFFERED=1
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
t0=$SECONDS
cmake -G Ninja -S .probe/new -B /tmp/new -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
  -DGPUKIT_BUILD_EXAMPLES=OFF > /tmp/cfg.log 2>&1 || tail -20 /tmp/cfg.log
cmake --build /tmp/new -j 16 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > /tmp/build.log 2>&1 || grep -E "error" -A3 /tmp/build.log | head -30
echo "build done in $((SECONDS-t0)) s; $(cat .probe/new/COMMIT)"
cd .probe/new && GPUKIT_LIBRARY=/tmp/new/lib/libgpukit.so PYTHONPATH=/tmp/new/lib/gpukit/python:$PWD/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error \
  python3 ../s13/paths.py $(cat COMMIT) 2>&1 | grep -v -i deprecat | tee $OUT/paths.txt
echo "total $((SECONDS-t0)) s"
