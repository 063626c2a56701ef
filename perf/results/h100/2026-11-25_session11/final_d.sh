#!/usr/bin/env bash
# After the host-side refactor of the norm launch: reductions plugin + reductions_check.
set -uo pipefail
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
t0=$SECONDS
cmake -G Ninja -S . -B /tmp/b -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
  -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/cfg.log 2>&1 || tail -20 $OUT/cfg.log
cmake --build /tmp/b -j 16 --target reductions_check > $OUT/build.log 2>&1 || grep -E "error" -A3 $OUT/build.log | head -30
echo "build done in $((SECONDS-t0)) s; commit $(cat COMMIT)"
/tmp/b/bin/reductions_check --no-perf > $OUT/reductions_check.log 2>&1; echo "reductions_check exit $?: $(grep -E 'compared' $OUT/reductions_check.log | tail -1)"
