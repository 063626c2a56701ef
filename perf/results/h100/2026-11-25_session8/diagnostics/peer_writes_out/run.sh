bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_cublaslt gpukit_matmul_sm90 gpukit_matmul_sm80 || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=error GPUKIT_COMMIT=$(cat COMMIT)
for r in 1 2 3; do
  python3 perf/harness.py $OUT/harness_matmul_$r --family matmul > $OUT/harness_matmul_$r.log 2>&1; echo "harness $r exit $?"
  grep -E "^\| matmul" $OUT/harness_matmul_$r/results.md | awk -F'|' '{printf "%s %s;", $3, $8} END {print ""}' | sed 's/matmul //g'
done
cd $OUT && tar czf all.tgz *.log harness_matmul_* && rm -rf *.log harness_matmul_*
