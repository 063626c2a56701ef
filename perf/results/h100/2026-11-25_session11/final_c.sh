#!/usr/bin/env bash
# Conformance (reductions plugin) three times with fresh seeds after the sum-input fix,
# then one harness process of the reductions family, packed into one archive.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
t0=$SECONDS
cmake -G Ninja -S . -B /tmp/b -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
  -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/cfg.log 2>&1 || tail -20 $OUT/cfg.log
cmake --build /tmp/b -j 16 --target gpukit gpukit_cpu gpukit_reductions_cuda gpu_tests gpukit_compiled_call > $OUT/build.log 2>&1 || grep -E "error" -A3 $OUT/build.log | head -30
echo "build done in $((SECONDS-t0)) s"
mkdir -p $OUT/x
for i in 1 2 3; do
  /tmp/b/bin/gpu_tests --gtest_filter='GpuConformance.*' > $OUT/x/conformance_$i.log 2>&1
  echo "conformance $i exit $?: $(grep -E 'seed|conformance:|Failure|error' $OUT/x/conformance_$i.log | tr '\n' ' ')"
done
export GPUKIT_LIBRARY=/tmp/b/lib/libgpukit.so PYTHONPATH=/tmp/b/lib/gpukit/python:$PWD/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat COMMIT)
python3 perf/harness.py $OUT/x/harness_3 --family reductions > $OUT/x/harness_3.log 2>&1; echo "harness exit $?"
grep -E "layernorm \[16384|rmsnorm \[16384|add \[67108864\] \| bfloat16|silu" $OUT/x/harness_3/results.md | cut -c1-200
cd $OUT && tar czf session11_c.tgz x && rm -rf x
