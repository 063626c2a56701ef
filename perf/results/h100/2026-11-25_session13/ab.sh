#!/usr/bin/env bash
# Session 13 A/B: base (091966d) and new (lean softmax / row-reduction parameters) builds;
# the add bf16 waves probe (NVRTC, before the builds, GPU idle); reductions_check and
# conformance on new; passes.py base/new x2; harness (reductions) base/new x2.
set -uo pipefail
export PYTHONUNBUFFERED=1
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
mkdir -p $OUT/x
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
python3 .probe/s13/waves.py 2>&1 | grep -v -i deprecat | tee $OUT/x/waves.txt
echo "waves done ($((SECONDS-t0)) s)"
for v in base new; do
  ( cmake -G Ninja -S .probe/$v -B /tmp/$v -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
      -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/x/cfg_$v.log 2>&1 || tail -20 $OUT/x/cfg_$v.log
    cmake --build /tmp/$v -j 8 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call $([ $v = new ] && echo reductions_check gpu_tests) > $OUT/x/build_$v.log 2>&1 || grep -E "error" -A3 $OUT/x/build_$v.log | head -30 ) &
done
wait
echo "builds done in $((SECONDS-t0)) s; base $(cat .probe/base/COMMIT), new $(cat .probe/new/COMMIT)"
/tmp/new/bin/reductions_check --no-perf > $OUT/x/reductions_check.log 2>&1; echo "reductions_check exit $?: $(grep -E 'compared' $OUT/x/reductions_check.log | tail -1)"
grep -E "FAIL" $OUT/x/reductions_check.log | head -5
/tmp/new/bin/gpu_tests --gtest_filter='GpuConformance.*' > $OUT/x/conformance.log 2>&1
echo "conformance exit $?: $(grep -E 'seed|conformance:|Failure' $OUT/x/conformance.log | head -5 | tr '\n' ' ')"
env_for() { echo "GPUKIT_LIBRARY=/tmp/$1/lib/libgpukit.so PYTHONPATH=/tmp/$1/lib/gpukit/python:$PWD/.probe/$1/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat .probe/$1/COMMIT)"; }
for r in 1 2; do
  for v in base new; do
    ( cd .probe/$v && env $(env_for $v) python3 ../s13/passes.py $v 2>&1 | grep -v -i deprecat | tee -a $OUT/x/passes.txt )
  done
done
echo "passes done ($((SECONDS-t0)) s)"
for r in 1 2; do
  for v in base new; do
    ( cd .probe/$v && env $(env_for $v) python3 perf/harness.py $OUT/x/harness_${v}_$r --family reductions --tag $v > $OUT/x/harness_${v}_$r.log 2>&1
      grep -E "\| (sum|argmax|softmax|add|silu|layernorm|rmsnorm|add_rmsnorm) " $OUT/x/harness_${v}_$r/results.md | awk -F'|' -v t="$v$r" '{printf "%s |%s|%s|%s|%s|%s\n", t, $3, $4, $6, $7, $8}' )
  done
done
echo "total $((SECONDS-t0)) s"
cd $OUT && tar czf s13_ab.tgz x && rm -rf x
