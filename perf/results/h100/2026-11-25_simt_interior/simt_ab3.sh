B=build-gpu; MC=$B/bin/matmul_check; P=.probe
$MC --no-check --only "f32" $P/old/libgpukit_matmul_sm80_old.so $P/bk8/libgpukit_matmul_sm80_bk8.so $P/bk16/libgpukit_matmul_sm80_bk16.so $P/bk8r1/libgpukit_matmul_sm80_bk8r1.so $P/bk16r1/libgpukit_matmul_sm80_bk16r1.so > $OUT/simt_ab3.txt 2>&1
tail -4 $OUT/simt_ab3.txt
for v in bk8 bk16; do timeout 200 $MC --no-bench $P/$v/libgpukit_matmul_sm80_$v.so > $OUT/check_$v.log 2>&1; echo "check $v: rc=$? $(grep -c ' ok' $OUT/check_$v.log) ok $(grep -c FAIL $OUT/check_$v.log) FAIL"; done
