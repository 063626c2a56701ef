set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
if [ ! -f /tmp/b-new/lib/libgpukit.so ]; then
cmake -G Ninja -S . -B /tmp/b-new -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
    -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/cfg.log 2>&1 || tail -20 $OUT/cfg.log
cmake --build /tmp/b-new -j 16 --target gpukit gpukit_cpu gpukit_reductions_cuda gpukit_compiled_call > $OUT/build.log 2>&1 || grep -E "error" -A3 $OUT/build.log | head -30
fi
export GPUKIT_LIBRARY=/tmp/b-new/lib/libgpukit.so PYTHONPATH=/tmp/b-new/lib/gpukit/python:$PWD/bindings/python:/tmp/site GPUKIT_LOG_LEVEL=error
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
$NCU --clock-control none --csv --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum \
  python3 .probe/ew/ncu_ew.py > $OUT/ncu_ew.csv 2> $OUT/ncu_err.txt
tail -3 $OUT/ncu_err.txt
python3 - <<'PY'
import csv, os, collections
rows = list(csv.DictReader(open(os.environ["OUT"] + "/ncu_ew.csv")))
by = collections.OrderedDict()
for r in rows:
    k = (r["ID"], r["Kernel Name"][:90])
    by.setdefault(k, {})[r["Metric Name"]] = r["Metric Value"] + " " + r["Metric Unit"]
for (i, name), m in by.items():
    if "sum" in name or "reduce" in name.lower(): continue
    print(i, name)
    print("   ", "; ".join(f"{k.split('__')[1]}={v}" for k, v in m.items()))
PY
