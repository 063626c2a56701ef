export GPUKIT_LIBRARY=build-gpu/lib/libgpukit.so PYTHONPATH=bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=warning
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
for cc in all none; do
ncu --profile-from-start off --cache-control $cc --clock-control none --metrics gpu__time_duration.sum python3 .probe/lbncu.py > $OUT/lbncu_$cc.txt 2>&1
echo "== cache-control $cc"
python3 - $OUT/lbncu_$cc.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list); name = None
for line in open(sys.argv[1]):
    m = re.match(r"\s+(\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m: name = m.group(1)[:70]
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", "")); v = v / 1000 if m.group(1) == "nsecond" else v
        d[name].append(v)
for k, v in d.items(): print(f"{k:72s} n={len(v)} median {sorted(v)[len(v)//2]:.2f} us")
PY
done
