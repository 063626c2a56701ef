bash perf/run_gpu.sh build > /dev/null 2>&1; B=build-gpu; tail -1 $B/out/build.log
export GPUKIT_LIBRARY=$PWD/$B/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_COMMIT=$(cat COMMIT)
python3 perf/harness.py $OUT/harness_quick --quick > $OUT/harness_quick.log 2>&1; echo "harness rc=$?"; grep ratio $OUT/harness_quick.log | sed -E 's/\[[0-9]+\/[0-9]+\] //'
$B/bin/matmul_check --no-check --only "4096x4096x4096 bf16 N" $B/lib/gpukit/plugins/libgpukit_{matmul_sm90,cublaslt}.so | tail -2
$B/bin/bench_capi_dlpack --device cuda | grep "^C: to_dlpack_versioned + from"
$B/bin/gpu_tests 2>&1 | grep -E "^conformance:|PASSED|FAILED"
