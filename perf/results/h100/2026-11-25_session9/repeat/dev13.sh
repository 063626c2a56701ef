bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_cublaslt gpukit_matmul_sm90 gpukit_matmul_sm80 gpukit_reductions_cuda gpu_tests || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=warning GPUKIT_COMMIT=$(cat COMMIT)
build-gpu/bin/gpu_tests --gtest_filter='GpuCublasLt.*' > $OUT/cublaslt_test.log 2>&1; echo "cublaslt test exit $?"; grep -E "explain after|PASSED|FAILED" $OUT/cublaslt_test.log
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/bin/gpu_tests --gtest_filter='GpuCublasLt.*' > $OUT/memcheck_cublaslt.log 2>&1; echo "memcheck cublaslt exit $?"; grep -E "explain after|ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck_cublaslt.log
for r in 2 3; do python3 perf/harness.py $OUT/harness_$r --family matmul,reductions > $OUT/harness_$r.log 2>&1; echo "harness $r exit $?"; grep -E "^\| (matmul|reductions)" $OUT/harness_$r/results.md | awk -F'|' '$8+0 < 1.0 {printf "%s %s;", $3, $8} END {print ""}'; grep -E "^\| (matmul|reductions)" $OUT/harness_$r/results.md | awk -F'|' 'BEGIN{m=9} $8+0 < m {m=$8+0; r=$3} END {print "min", m, r}'; done
cd $OUT && tar czf all.tgz *.log harness_* && rm -rf *.log harness_*
