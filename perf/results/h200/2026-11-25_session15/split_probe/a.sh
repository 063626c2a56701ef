#!/usr/bin/env bash
# Session 15, call A: reductions-only builds of base (HEAD) and var (env overrides of the
# split-row plan and a wide narrowing-cast kernel); sumall.py under each configuration.
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
t0=$SECONDS
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/a
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/a/device.txt
for v in base var; do
  ( [ -f /tmp/$v/lib/libgpukit_reductions_cuda.so ] || cmake -G Ninja -S .probe/s15/$v -B /tmp/$v -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
      -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/a/cfg_$v.log 2>&1 || tail -20 $OUT/a/cfg_$v.log
    cmake --build /tmp/$v -j 8 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > $OUT/a/build_$v.log 2>&1 || grep -E "error" -A3 $OUT/a/build_$v.log | head -30 ) &
done
wait
echo "builds done in $((SECONDS-t0)) s"
run() {  # tree, tag, what, extra env
  local v=$1 tag=$2 what=$3; shift 3
  ( cd $ROOT/.probe/s15/$v && env "$@" GPUKIT_LIBRARY=/tmp/$v/lib/libgpukit.so PYTHONPATH=/tmp/$v/lib/gpukit/python:$ROOT/.probe/s15/$v/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error \
      python3 $ROOT/.probe/s15/sumall.py $tag $what 2>&1 | grep -v -i deprecat | tee -a $OUT/a/sumall.txt )
}
run base base all X=1
run var wide cast GK_EW_WIDE=1
run var blocks2376 red GK_SPLIT_BLOCKS=2376
run var blocks9504 red GK_SPLIT_BLOCKS=9504
run var lean red GK_SPLIT_LEAN=1
run var lean7920 red GK_SPLIT_LEAN=1 GK_SPLIT_BLOCKS=7920
run var warp8k red GK_WARP_CHUNK=8192
run var warp16k red GK_WARP_CHUNK=16384
run var warp32k red GK_WARP_CHUNK=32768
run var grid396 red GK_SPLIT_GRID=396
run var grid1056 red GK_SPLIT_GRID=1056
run base base2 all X=1
run var wide2 cast GK_EW_WIDE=1
echo "total $((SECONDS-t0)) s"
