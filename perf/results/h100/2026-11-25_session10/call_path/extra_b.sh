#!/usr/bin/env bash
# After `perf/run_gpu.sh bench` on the same machine: the call path A/B on the H100 host.
set -uo pipefail
export PYTHONUNBUFFERED=1 GPUKIT_LIBRARY=$PWD/build-gpu/lib/libgpukit.so GPUKIT_LOG_LEVEL=warning
export PYTHONPATH=$PWD/bindings/python:/tmp/gpukit-site GPUKIT_COMMIT=$(cat COMMIT 2>/dev/null || echo unknown)
mkdir -p $OUT/x
python3 -c "import gpukit; print('call path:', gpukit.CALL_PATH)"
for r in 1 2 3; do
  python3 perf/python/bench_call_overhead.py --json $OUT/x/call_warm_$r.json > $OUT/x/call_warm_$r.log 2>&1
  python3 perf/python/bench_call_overhead.py --cold --json $OUT/x/call_cold_$r.json > $OUT/x/call_cold_$r.log 2>&1
done
tail -8 $OUT/x/call_warm_3.log; tail -8 $OUT/x/call_cold_3.log
for r in 1 2 3; do
  GPUKIT_PURE_PYTHON=1 python3 perf/harness.py $OUT/x/h_python_$r --family reductions > $OUT/x/h_python_$r.log 2>&1
  python3 perf/harness.py $OUT/x/h_compiled_$r --family reductions > $OUT/x/h_compiled_$r.log 2>&1
done
cd $OUT/x && python3 - <<'PY'
import json
runs=[f"h_{v}_{r}" for r in (1,2,3) for v in ("python","compiled")]
data={}
for r in runs:
    d=json.load(open(f"{r}/results.json")); data[r]={x["name"]:x for x in d["rows"] if "ratio" in x}
    print(r, d["meta"].get("call_path"))
print("row".ljust(34), " ".join(r.replace("h_","").ljust(11) for r in runs))
for name in data[runs[0]]:
    if "*" in name or data[runs[0]][name].get("timing","").startswith("per call"):
        print(name.ljust(34), " ".join(f'{data[r][name]["ratio"]:.3f}/{data[r][name]["ours_ms"]*1000:.1f}'.ljust(11) for r in runs))
PY
cd $OUT && tar czf extra.tgz x && rm -rf x
