B=build-gpu; MC=$B/bin/matmul_check; P=.probe
for r in 1 2; do
$MC --no-check --only "f32" $P/old/libgpukit_matmul_sm80_old.so $P/bk8r1/libgpukit_matmul_sm80_bk8r1.so $P/split2/libgpukit_matmul_sm80_split2.so $P/split1/libgpukit_matmul_sm80_split1.so > $OUT/simt_ab5_$r.txt 2>&1
tail -2 $OUT/simt_ab5_$r.txt
done
timeout 200 $MC --no-bench $P/split2/libgpukit_matmul_sm80_split2.so > $OUT/check_split2.log 2>&1; echo "check split2: rc=$? $(grep -c ' ok' $OUT/check_split2.log) ok $(grep -c FAIL $OUT/check_split2.log) FAIL"
