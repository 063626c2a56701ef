#!/usr/bin/env bash
# Session 15, call D (H200): base and new (HEAD) reductions-only builds, sumall and the harness: reductions-only builds of base (HEAD) and var (env overrides of the
# split-row plan and a wide narrowing-cast kernel); sumall.py under each configuration.
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
t0=$SECONDS
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/d
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/d/device.txt
for v in base new; do
  ( [ -f /tmp/$v/lib/libgpukit_reductions_cuda.so ] || cmake -G Ninja -S .probe/s15/$v -B /tmp/$v -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
      -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/d/cfg_$v.log 2>&1 || tail -20 $OUT/d/cfg_$v.log
    cmake --build /tmp/$v -j 8 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > $OUT/d/build_$v.log 2>&1 || grep -E "error" -A3 $OUT/d/build_$v.log | head -30 ) &
done
wait
echo "builds done in $((SECONDS-t0)) s"
run() {  # tree, tag, what, extra env
  local v=$1 tag=$2 what=$3; shift 3
  ( cd $ROOT/.probe/s15/$v && env "$@" GPUKIT_LIBRARY=/tmp/$v/lib/libgpukit.so PYTHONPATH=/tmp/$v/lib/gpukit/python:$ROOT/.probe/s15/$v/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error \
      python3 $ROOT/.probe/s15/sumall.py $tag $what 2>&1 | grep -v -i deprecat | tee -a $OUT/d/sumall.txt )
}
harness() {  # tree, tag, extra env
  local v=$1 tag=$2; shift 2
  ( cd $ROOT/.probe/s15/$v && env "$@" GPUKIT_LIBRARY=/tmp/$v/lib/libgpukit.so PYTHONPATH=/tmp/$v/lib/gpukit/python:$ROOT/.probe/s15/$v/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat $ROOT/.probe/s15/$v/COMMIT) \
      python3 perf/harness.py $OUT/d/harness_$tag --family reductions --tag $tag > $OUT/d/harness_$tag.log 2>&1 )
  rm -f $OUT/d/harness_$tag/ratios.png
  grep -E "ratio|Error|error" $OUT/d/harness_$tag.log | sed "s/^/$tag /"
}
run base base red X=1
run new new red X=1
harness base base
harness new new_1
harness new new_2
run base base2 red X=1
run new new2 red X=1
rm -f $OUT/d/cfg_*.log $OUT/d/build_*.log $OUT/d/harness_*.log
echo "total $((SECONDS-t0)) s"
