#!/usr/bin/env bash
# Call 2 on the same warm machine (run from /tmp/src, built by call 1): two harness
# processes of the reductions family, then compute-sanitizer over reductions_check.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/gpukit-site:$PWD/bindings/python
DEPS=/tmp/gpukit-deps
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning GPUKIT_COMMIT=$(cat COMMIT)
for i in 1 2; do
  python3 perf/harness.py $OUT/harness_$i --family reductions > $OUT/harness_$i.log 2>&1; echo "harness $i exit $?"
done
for tool in memcheck racecheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/bin/reductions_check --no-perf > $OUT/${tool}_reductions.log 2>&1
  echo "compute-sanitizer $tool: exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/${tool}_reductions.log | tail -1)"
done
grep -E "layernorm|rmsnorm|softmax|add \[|silu" $OUT/harness_1/results.md $OUT/harness_2/results.md | cut -c1-220
