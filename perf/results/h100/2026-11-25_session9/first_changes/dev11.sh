# session 9: cublaslt more rounds + reductions PDL finalize
bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_cublaslt gpukit_matmul_sm90 gpukit_matmul_sm80 gpukit_reductions_cuda gpu_tests reductions_check || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat COMMIT)
build-gpu/bin/gpu_tests --gtest_filter='GpuCublasLt.*' > $OUT/cublaslt_test.log 2>&1; echo "cublaslt test exit $?"; grep -E "explain after|PASSED|FAILED" $OUT/cublaslt_test.log
build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check.log 2>&1; echo "reductions_check exit $?"; grep -E "^checks:" $OUT/reductions_check.log | tail -1
timeout 120 compute-sanitizer --tool memcheck build-gpu/bin/reductions_check --no-perf > $OUT/memcheck_reductions.log 2>&1; echo "memcheck exit $?"; grep -E "ERROR SUMMARY" $OUT/memcheck_reductions.log
timeout 120 compute-sanitizer --tool synccheck build-gpu/bin/reductions_check --no-perf > $OUT/synccheck_reductions.log 2>&1; echo "synccheck exit $?"; grep -E "ERROR SUMMARY" $OUT/synccheck_reductions.log
python3 perf/harness.py $OUT/harness_red --family reductions > $OUT/harness_red.log 2>&1; echo "harness red exit $?"
grep -E "^\| reductions" $OUT/harness_red/results.md | awk -F'|' '{printf "%s %s %s;", $3, $4, $8} END {print ""}'
for r in 1 2; do
  python3 perf/harness.py $OUT/harness_matmul_$r --family matmul > $OUT/harness_matmul_$r.log 2>&1; echo "harness mm $r exit $?"
  grep -E "^\| matmul" $OUT/harness_matmul_$r/results.md | awk -F'|' '{printf "%s %s %s;", $3, $4, $8} END {print ""}' | sed 's/matmul //g'
done
python3 .probe/mmexplain.py > $OUT/mmexplain.txt 2>&1; tail -12 $OUT/mmexplain.txt
