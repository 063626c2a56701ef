B=build-gpu; MC=$B/bin/matmul_check; P=.probe
for r in 1 2; do
$MC --no-check --only "f32" $P/old/libgpukit_matmul_sm80_old.so $P/bk8/libgpukit_matmul_sm80_bk8.so $P/bk8r1/libgpukit_matmul_sm80_bk8r1.so $P/bk16r1/libgpukit_matmul_sm80_bk16r1.so $P/bk8r1g16/libgpukit_matmul_sm80_bk8r1g16.so > $OUT/simt_ab4_$r.txt 2>&1
tail -2 $OUT/simt_ab4_$r.txt
done
