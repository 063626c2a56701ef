#!/usr/bin/env bash
# Session 15, call C: the full build and GPU test stage of HEAD (perf/run_gpu.sh build, test),
# a reductions-only build of base (21b2c2a) beside it, then the reductions harness of HEAD and
# sumall.py base / HEAD taking turns.
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
t0=$SECONDS
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/c
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/c/device.txt
( export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
  cmake -G Ninja -S .probe/s15/base -B /tmp/base -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
    -DGPUKIT_BUILD_EXAMPLES=OFF > /tmp/cfg_base.log 2>&1 || tail -20 /tmp/cfg_base.log
  cmake --build /tmp/base -j 4 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > /tmp/build_base.log 2>&1 || grep -E "error" -A3 /tmp/build_base.log | head -30 ) &
bash perf/run_gpu.sh build > $OUT/c/run_build.log 2>&1; echo "build exit $? at $((SECONDS-t0)) s"; tail -3 $OUT/c/run_build.log
wait
echo "base built at $((SECONDS-t0)) s"
bash perf/run_gpu.sh test > $OUT/c/run_test.log 2>&1; echo "test exit $? at $((SECONDS-t0)) s"
cp build-gpu/out/summary.txt $OUT/c/test_summary.txt; cat $OUT/c/test_summary.txt
( cd build-gpu/out && tar czf $OUT/c/test_logs.tgz *.log )
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
( GPUKIT_LIBRARY=$ROOT/build-gpu/lib/libgpukit.so PYTHONPATH=$ROOT/build-gpu/lib/gpukit/python:$ROOT/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat COMMIT) \
    python3 perf/harness.py $OUT/c/harness --family reductions --tag new > $OUT/c/harness.log 2>&1 )
rm -f $OUT/c/harness/ratios.png; grep ratio $OUT/c/harness.log
sumall() {  # lib dir, src dir, tag
  ( cd $2 && GPUKIT_LIBRARY=$1/lib/libgpukit.so PYTHONPATH=$1/lib/gpukit/python:$2/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error \
      python3 $ROOT/.probe/s15/sumall.py $3 red 2>&1 | grep -v -i deprecat | tee -a $OUT/c/sumall.txt )
}
sumall /tmp/base $ROOT/.probe/s15/base base
sumall $ROOT/build-gpu $ROOT new
rm -f $OUT/c/harness.log
echo "total $((SECONDS-t0)) s"
