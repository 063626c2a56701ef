#!/usr/bin/env bash
# Session 13, call D (same warm machine as C): perf/run_gpu.sh test on build-gpu/, then
# compute-sanitizer memcheck / racecheck / synccheck over reductions_check.
set -uo pipefail
ls build-gpu/lib/libgpukit.so > /dev/null || { echo "no build-gpu: machine not warm"; exit 1; }
cp .probe/new/COMMIT COMMIT
t0=$SECONDS
mkdir -p $OUT/test
if [ -z "${TOOLS:-}" ]; then
  OUT=$OUT/test bash perf/run_gpu.sh test > /tmp/test.log 2>&1; echo "test stage exit $? in $((SECONDS-t0)) s"
  sed -n '/==== summary ====/,$p' /tmp/test.log
fi
for tool in ${TOOLS:-memcheck}; do
  timeout 170 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/bin/reductions_check --no-perf > $OUT/test/${tool}_reductions.log 2>&1
  echo "compute-sanitizer $tool over reductions_check: exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/test/${tool}_reductions.log | tail -1) ($((SECONDS-t0)) s)"
done
cd $OUT/test && tar czf ../s13_sanitize_$(echo ${TOOLS:-memcheck} | tr ' ' _).tgz *_reductions.log && rm -f *_reductions.log
