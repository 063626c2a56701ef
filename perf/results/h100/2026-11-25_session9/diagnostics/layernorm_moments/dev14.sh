bash .probe/quick_build.sh gpukit gpukit_cpu gpukit_reductions_cuda reductions_check || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
export GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=warning GPUKIT_COMMIT=$(cat COMMIT)
build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check.log 2>&1; echo "check exit $? $(grep -E '^checks:' $OUT/reductions_check.log | tail -1)"
grep -E "^ok +(layernorm|add_layernorm)" $OUT/reductions_check.log | sed "s/.*worst=//" | sort -g | tail -1 | sed "s/^/layernorm worst /"
for t in memcheck racecheck synccheck; do timeout 150 compute-sanitizer --tool $t --error-exitcode 9 build-gpu/bin/reductions_check --no-perf > $OUT/${t}_reductions.log 2>&1; echo "$t exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/${t}_reductions.log | tail -1)"; done
tar xJf .probe/normold.txz -C .probe
P=build-gpu/lib/gpukit/plugins/libgpukit_reductions_cuda.so; cp $P /tmp/new.so
for r in 1 2; do for v in new old; do
  if [ $v = new ]; then cp /tmp/new.so $P; else cp .probe/normold/libgpukit_reductions_cuda.so $P; fi
  python3 perf/harness.py $OUT/h_${v}_$r --family reductions > $OUT/h_${v}_$r.log 2>&1
  echo "$v r$r: $(grep -E '^\| reductions \| (layernorm|rmsnorm|add_rmsnorm)' $OUT/h_${v}_$r/results.md | awk -F'|' '{printf "%s %s %s %s;", $3, $7, $8, $9}')"
done; done
cp /tmp/new.so $P
cd $OUT && find . -name "*.png" -delete && tar czf all.tgz *.log h_* && rm -rf *.log h_*
