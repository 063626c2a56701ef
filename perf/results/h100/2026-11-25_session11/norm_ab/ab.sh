#!/usr/bin/env bash
# Session 11, GPU A/B: layernorm/rmsnorm full-row packed forms (working tree) against
# HEAD (.probe/base): probe (one process, both kernels), reductions_check on the new
# build, harness processes alternating base/new (torch in the same process).
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for i in 1 2; do .probe/norm/norm_probe > $OUT/probe_$i.txt 2>&1; done; cat $OUT/probe_1.txt $OUT/probe_2.txt | grep -v "^device"
build() {  # src dir, build dir
  cmake -G Ninja -S $1 -B $2 -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
    -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/cfg_$(basename $2).log 2>&1 || { tail -20 $OUT/cfg_$(basename $2).log; return 1; }
  cmake --build $2 -j 8 --target gpukit gpukit_cpu gpukit_reductions_cuda reductions_check gpukit_compiled_call > $OUT/build_$(basename $2).log 2>&1 \
    || { grep -E "error" -A3 $OUT/build_$(basename $2).log | head -30; return 1; }
}
t0=$SECONDS
build . /tmp/b-new & build .probe/base /tmp/b-base & wait
echo "builds done in $((SECONDS-t0)) s"
/tmp/b-new/bin/reductions_check --no-perf > $OUT/reductions_check.log 2>&1; echo "reductions_check exit $?: $(grep -E '^checks:|compared' $OUT/reductions_check.log | tail -2)"
export GPUKIT_LOG_LEVEL=warning
for r in 1 2 3; do
  for v in base new; do
    b=/tmp/b-new; src=.; [ $v = base ] && { b=/tmp/b-base; src=.probe/base; }
    GPUKIT_COMMIT=$(cat .probe/base/COMMIT)$([ $v = new ] && echo +fullrow) GPUKIT_LIBRARY=$b/lib/libgpukit.so \
      PYTHONPATH=$b/lib/gpukit/python:$PWD/$src/bindings/python:/tmp/site \
      python3 $src/perf/harness.py $OUT/h_${v}_$r --family reductions > $OUT/h_${v}_$r.log 2>&1
    echo "harness $v $r exit $? ($((SECONDS-t0)) s)"
  done
done
cd $OUT; python3 - <<'PY' | tee ab_table.txt
import json
runs=["h_base_1","h_new_1","h_base_2","h_new_2","h_base_3","h_new_3"]
data={r: {(x["name"],x["dtype"]): x for x in json.load(open(f"{r}/results.json"))["rows"]} for r in runs}
print(f'{"row":36s} {"dtype":9s} ' + " ".join(f"{r:>13s}" for r in runs))
for key in data[runs[0]]:
    cells=[]
    for r in runs:
        x=data[r].get(key)
        cells.append(f'{x["ratio"]:.3f}/{x["ours_ms"]:.4f}' if x else "-")
    print(f"{key[0]:36s} {key[1]:9s} " + " ".join(f"{c:>13s}" for c in cells))
print("call path:", {r: json.load(open(f"{r}/results.json")).get("meta", {}).get("call_path") for r in runs})
PY
tar czf all.tgz *.log h_* && rm -rf h_* *.log
