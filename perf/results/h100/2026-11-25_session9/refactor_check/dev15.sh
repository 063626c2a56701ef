bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_reductions_cuda reductions_check || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=warning GPUKIT_COMMIT=$(cat COMMIT)
build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check.log 2>&1; echo "check exit $? $(grep -E '^checks:' $OUT/reductions_check.log | tail -1)"
for t in racecheck synccheck; do timeout 150 compute-sanitizer --tool $t --error-exitcode 9 build-gpu/bin/reductions_check --no-perf > $OUT/${t}_reductions.log 2>&1; echo "$t exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/${t}_reductions.log | tail -1)"; done
python3 perf/harness.py $OUT/harness --family reductions > $OUT/harness.log 2>&1; echo "harness exit $?"
grep -E '^\| reductions \| (sum|argmax)' $OUT/harness/results.md | awk -F'|' '{printf "%s %s %s;", $3, $8, $9}'; echo
cd $OUT && find . -name "*.png" -delete && tar czf all.tgz *.log harness && rm -rf *.log harness
