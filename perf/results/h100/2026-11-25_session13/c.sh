#!/usr/bin/env bash
# Session 13, call C: the full GPU build of HEAD (perf/run_gpu.sh build, build-gpu/) beside a
# reductions-only build of base (091966d); then passes.py base/new x2 and the reductions
# harness base/new x2 (torch in the same process each time).
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
grep -E "build:|FAILED|device" $OUT/x/run_gpu_build.log | head; echo "builds done in $((SECONDS-t0)) s; base $(cat .probe/base/COMMIT), new $(cat COMMIT)"
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
ROOT=$PWD
env_for() {
  if [ $1 = new ]; then b=$ROOT/build-gpu; src=$ROOT; else b=/tmp/base; src=$ROOT/.probe/base; fi
  echo "GPUKIT_LIBRARY=$b/lib/libgpukit.so PYTHONPATH=$b/lib/gpukit/python:$src/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat $src/COMMIT)"
}
for r in 1 2; do
  for v in base new; do
    src=$ROOT; [ $v = base ] && src=$ROOT/.probe/base
    ( cd $src && env $(env_for $v) python3 $ROOT/.probe/s13/passes.py $v 2>&1 | grep -v -i deprecat | tee -a $OUT/x/passes.txt )
  done
done
for r in 1 2; do
  for v in base new; do
    src=$ROOT; [ $v = base ] && src=$ROOT/.probe/base
    ( cd $src && env $(env_for $v) python3 perf/harness.py $OUT/x/harness_${v}_$r --family reductions --tag $v > $OUT/x/harness_${v}_$r.log 2>&1
      grep -E "\| (sum|argmax|softmax|add|silu|gelu|cast|layernorm|rmsnorm|add_rmsnorm) " $OUT/x/harness_${v}_$r/results.md | awk -F'|' -v t="$v$r" '{printf "%s |%s|%s|%s|%s|%s\n", t, $3, $4, $6, $7, $8}' )
  done
done
echo "total $((SECONDS-t0)) s"
cd $OUT && tar czf s13_c.tgz x && rm -rf x
