bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_reductions_cuda || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning GPUKIT_COMMIT=$(cat COMMIT)
NEW=$PWD/bindings/python:/tmp/gpukit-site; OLD=$PWD/.probe/oldbind/bindings/python:/tmp/gpukit-site; export GPUKIT_INCLUDE_DIR=$PWD/abi/include
for r in 1 2; do for v in old new; do
  if [ $v = new ]; then P=$NEW; else P=$OLD; fi
  PYTHONPATH=$P python3 -c "import gpukit,sys; print(gpukit.__file__)" | head -1
  PYTHONPATH=$P python3 perf/harness.py $OUT/h_${v}_$r --family reductions > $OUT/h_${v}_$r.log 2>&1
  echo "$v r$r: $(grep -E '^\| reductions .*\*' $OUT/h_${v}_$r/results.md | awk -F'|' '{printf "%s %s %s %s;", $3, $6, $7, $8}')"
done; done
for v in new old; do if [ $v = new ]; then P=$NEW; else P=$OLD; fi; echo "$v cold:"; PYTHONPATH=$P python3 $([ $v = new ] && echo perf/python || echo .probe/oldbind/perf/python)/bench_call_overhead.py --cold 2>&1 | tail -4; done > $OUT/call_overhead_cold.txt 2>&1; cat $OUT/call_overhead_cold.txt
cd $OUT && find . -name "*.png" -delete && tar czf all.tgz *.log *.txt h_* && rm -rf *.log h_*
