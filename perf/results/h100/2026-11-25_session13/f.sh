#!/usr/bin/env bash
# Session 13, call F: full GPU build of HEAD (run_gpu.sh build) beside a reductions-only build
# of base (5bf6562); paths.py base/new/base/new; harness (reductions) on new; then the test
# stage and memcheck over reductions_check on new.
set -uo pipefail
export PYTHONUNBUFFERED=1
cp .probe/new/COMMIT COMMIT
t0=$SECONDS
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/x
( OUT= bash perf/run_gpu.sh build > $OUT/x/run_gpu_build.log 2>&1 ) &
( export CMAKE_PREFIX_PATH=$DEPS/usr
  cmake -G Ninja -S .probe/base -B /tmp/base -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
    -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/x/cfg_base.log 2>&1 || tail -20 $OUT/x/cfg_base.log
  cmake --build /tmp/base -j 6 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > $OUT/x/build_base.log 2>&1 || grep -E "error" -A3 $OUT/x/build_base.log | head -30 ) &
wait
grep -E "build:|FAILED" $OUT/x/run_gpu_build.log | head -3; echo "builds done in $((SECONDS-t0)) s; base $(cat .probe/base/COMMIT), new $(cat COMMIT)"
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
ROOT=$PWD
env_for() {
  if [ $1 = new ]; then b=$ROOT/build-gpu; src=$ROOT; else b=/tmp/base; src=$ROOT/.probe/base; fi
  echo "GPUKIT_LIBRARY=$b/lib/libgpukit.so PYTHONPATH=$b/lib/gpukit/python:$src/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat $src/COMMIT)"
}
build-gpu/bin/reductions_check --no-perf > $OUT/x/reductions_check.log 2>&1; echo "reductions_check exit $?: $(grep -E '^checks:' $OUT/x/reductions_check.log | tail -1)"
grep FAIL $OUT/x/reductions_check.log | head -5
for v in base new base new; do
  src=$ROOT; [ $v = base ] && src=$ROOT/.probe/base
  ( cd $src && env $(env_for $v) python3 $ROOT/.probe/s13/paths.py $v 2>&1 | grep -v -i deprecat | tee -a $OUT/x/paths.txt | grep -E "sum|max" )
done
( env $(env_for new) python3 perf/harness.py $OUT/x/harness_new --family reductions --tag new > $OUT/x/harness_new.log 2>&1
  grep -E "\| reductions " $OUT/x/harness_new/results.md | awk -F'|' '{printf "new |%s|%s|%s|%s|%s|%s\n", $3, $4, $6, $7, $8, $9}' )
echo "perf done ($((SECONDS-t0)) s)"
mkdir -p $OUT/test
OUT=$OUT/test bash perf/run_gpu.sh test > /tmp/test.log 2>&1; echo "test stage exit $? ($((SECONDS-t0)) s)"
sed -n '/==== summary ====/,$p' /tmp/test.log | grep -v "^|"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/bin/reductions_check --no-perf > $OUT/x/memcheck_reductions.log 2>&1
echo "compute-sanitizer memcheck over reductions_check: exit $?, $(grep -E 'ERROR SUMMARY' $OUT/x/memcheck_reductions.log | tail -1) ($((SECONDS-t0)) s)"
cd $OUT && tar czf s13_f.tgz x && rm -rf x
