#!/usr/bin/env bash
# Session 10, GPU run 1: the one-barrier block reduction (working tree) against HEAD f368912
# (.probe/base), reductions plugin only, A/B in alternating harness processes.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
DEPS=/tmp/gpukit-deps; mkdir -p $DEPS; for d in .deps/*.deb; do dpkg -x $d $DEPS; done
find "$DEPS" -name '*.pc' -exec sed -i "s#=/usr#=$DEPS/usr#g" {} +
export CMAKE_PREFIX_PATH=$DEPS/usr LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/usr/lib/x86_64-linux-gnu
build() {  # src dir, build dir
  cmake -G Ninja -S $1 -B $2 -DCMAKE_BUILD_TYPE=Release -DGPUKIT_CUDA=ON -DGPUKIT_CUDA_ARCHITECTURES=90a-real \
    -DGPUKIT_BUILD_EXAMPLES=OFF > $OUT/cfg_$(basename $2).log 2>&1 || { tail -20 $OUT/cfg_$(basename $2).log; return 1; }
  cmake --build $2 -j 8 --target gpukit gpukit_cpu gpukit_reductions_cuda reductions_check > $OUT/build_$(basename $2).log 2>&1 \
    || { grep -E "error" -A3 $OUT/build_$(basename $2).log | head -30; return 1; }
}
t0=$SECONDS
build .probe/new build-gpu & build .probe/base build-gpu-base & wait
echo "builds done in $((SECONDS-t0)) s"; ls build-gpu/lib/gpukit/plugins build-gpu-base/lib/gpukit/plugins
build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check.log 2>&1; echo "rc $?"; build-gpu/bin/reductions_check --no-perf > $OUT/reductions_check2.log 2>&1; cmp <(grep -v time $OUT/reductions_check.log) <(grep -v time $OUT/reductions_check2.log) && echo "two checks identical"; echo "reductions_check exit $?: $(grep -E '^checks:' $OUT/reductions_check.log | tail -1)"
export GPUKIT_LOG_LEVEL=warning GPUKIT_COMMIT=f368912+onepass
for r in 1 2; do
  for v in base new; do
    b=build-gpu; src=.probe/new; [ $v = base ] && { b=build-gpu-base; src=.probe/base; }
    GPUKIT_LIBRARY=$PWD/$b/lib/libgpukit.so PYTHONPATH=$PWD/$src/bindings/python:/tmp/site \
      python3 $src/perf/harness.py $OUT/h_${v}_$r --family reductions > $OUT/h_${v}_$r.log 2>&1
    echo "harness $v $r exit $? ($((SECONDS-t0)) s)"
  done
done
cd $OUT; printf "%-36s %-9s" row dtype; for f in h_base_1 h_new_1 h_base_2 h_new_2; do printf " %9s" $f; done; echo
python3 - <<'PY'
import json
runs=["h_base_1","h_new_1","h_base_2","h_new_2"]
data={r: {(x["name"],x["dtype"]): x for x in json.load(open(f"{r}/results.json"))["rows"]} for r in runs}
for key in data[runs[0]]:
    cells=[]
    for r in runs:
        x=data[r].get(key)
        cells.append(f'{x["ratio"]:.3f}/{x.get("ours_copy_fraction",0)*100:.0f}%' if x else "-")
    print(f"{key[0]:36s} {key[1]:9s} " + " ".join(f"{c:>11s}" for c in cells))
PY
tar czf all.tgz *.log h_* && rm -rf h_* *.log
