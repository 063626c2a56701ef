# session 9: reductions all-element split variants (chunks 1584*F), block finalize + PDL
bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_reductions_cuda reductions_check gpu_tests || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat COMMIT)
tar xJf .probe/redvar.txz -C .probe
P=build-gpu/lib/gpukit/plugins/libgpukit_reductions_cuda.so; cp $P /tmp/base.so
build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check_base.log 2>&1; echo "base check exit $? $(grep -E '^checks:' $OUT/reductions_check_base.log | tail -1)"
for round in 1 2; do
for v in base 1 2 3 4; do
  if [ $v = base ]; then cp /tmp/base.so $P; else cp .probe/redvar_$v/libgpukit_reductions_cuda.so $P; fi
  python3 perf/harness.py $OUT/h_${v}_$round --family reductions > $OUT/h_${v}_$round.log 2>&1
  echo "$v r$round: $(grep -E '^\| reductions \| (sum|argmax)' $OUT/h_${v}_$round/results.md | awk -F'|' '{printf "%s %s %s %s;", $3, $7, $8, $9}')"
done; done
for v in 3 4; do cp .probe/redvar_$v/libgpukit_reductions_cuda.so $P; build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check_$v.log 2>&1; echo "v$v check exit $? $(grep -E '^checks:' $OUT/reductions_check_$v.log | tail -1)"; done
cp /tmp/base.so $P
timeout 200 compute-sanitizer --tool racecheck build-gpu/bin/reductions_check --no-perf > $OUT/racecheck_reductions.log 2>&1; echo "racecheck exit $?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck_reductions.log
build-gpu/bin/gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu_tests exit $?"; grep -E "^\[  (PASSED|FAILED)|^conformance" $OUT/gpu_tests.log
