B=build-carry; MC=$B/bin/matmul_check
$MC --no-check --only "4096x4096x4096 f32" .probe/old/libgpukit_matmul_sm80_old.so .probe/bn128/libgpukit_matmul_sm80_bn128.so .probe/bn256/libgpukit_matmul_sm80_bn256.so > $OUT/bench_f32_ab2.txt 2>&1; tail -4 $OUT/bench_f32_ab2.txt
