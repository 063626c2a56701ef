#!/usr/bin/env bash
# Session 15, call B: reductions-only builds of base (HEAD) and var (env overrides of the
# split-row plan and a wide narrowing-cast kernel); sumall.py under each configuration.
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
t0=$SECONDS
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/b/device.txt
for v in base var; do
  ( [ -f /tmp/$v/lib/libgpukit_reductions_cuda.so ] || cmake -G Ninja -S .probe/s15/$v -B /tmp/$v -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
      -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/b/cfg_$v.log 2>&1 || tail -20 $OUT/b/cfg_$v.log
    cmake --build /tmp/$v -j 8 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > $OUT/b/build_$v.log 2>&1 || grep -E "error" -A3 $OUT/b/build_$v.log | head -30 ) &
done
wait
echo "builds done in $((SECONDS-t0)) s"
run() {  # tree, tag, what, extra env
  local v=$1 tag=$2 what=$3; shift 3
  ( cd $ROOT/.probe/s15/$v && env "$@" GPUKIT_LIBRARY=/tmp/$v/lib/libgpukit.so PYTHONPATH=/tmp/$v/lib/gpukit/python:$ROOT/.probe/s15/$v/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error \
      python3 $ROOT/.probe/s15/sumall.py $tag $what 2>&1 | grep -v -i deprecat | tee -a $OUT/b/sumall.txt )
}
harness() {  # tree, tag, extra env
  local v=$1 tag=$2; shift 2
  ( cd $ROOT/.probe/s15/$v && env "$@" GPUKIT_LIBRARY=/tmp/$v/lib/libgpukit.so PYTHONPATH=/tmp/$v/lib/gpukit/python:$ROOT/.probe/s15/$v/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat $ROOT/.probe/s15/$v/COMMIT) \
      python3 perf/harness.py $OUT/b/harness_$tag --family reductions --tag $tag > $OUT/b/harness_$tag.log 2>&1 )
  rm -f $OUT/b/harness_$tag/ratios.png
  grep -E "ratio|Error|error" $OUT/b/harness_$tag.log | sed "s/^/$tag /"
}
for r in 1 2; do
  run base base$r all X=1
  run var fin$r red X=1
  run var finlean$r red GK_SPLIT_LEAN=1
  run var wide$r cast GK_EW_WIDE=1
done
harness base base
harness var new GK_SPLIT_LEAN=1 GK_EW_WIDE=1
rm -f $OUT/b/cfg_*.log $OUT/b/build_*.log $OUT/b/harness_*.log
echo "total $((SECONDS-t0)) s"
