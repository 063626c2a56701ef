export GPUKIT_LIBRARY=build-gpu/lib/libgpukit.so PYTHONPATH=bindings/python:/tmp/gpukit-site GPUKIT_LOG_LEVEL=warning
python3 -m pip install -q --no-index --no-deps --target /tmp/gpukit-site .whl/*.whl 2>/dev/null
python3 .probe/mm1024.py 2>&1 | tee $OUT/mm1024_timing.txt
ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum python3 .probe/mm1024.py ncu > $OUT/mm1024_ncu.txt 2>&1
grep -E "^\s+\S.*\(\d+, \d+, \d+\)x|^  [a-zA-Z_].*\(|gpu__time_duration" $OUT/mm1024_ncu.txt | sed 's/(\([0-9]*, [0-9]*, [0-9]*\))x.*/\1/' | cut -c1-110 | head -30
