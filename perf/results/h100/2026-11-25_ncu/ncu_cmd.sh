B=build-carry; P=$B/lib/gpukit/plugins; MC=$B/bin/matmul_check
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
W="--section WarpStateStats --section SchedulerStats --section InstructionStats"
$MC --no-check --only "8192x8192x8192 bf16 N" $P/libgpukit_matmul_sm90.so > $OUT/bench_8192.txt 2>&1; tail -2 $OUT/bench_8192.txt
$MC --no-check --only "4096x4096x4096 f32" $P/libgpukit_matmul_sm80.so > $OUT/bench_f32.txt 2>&1; tail -3 $OUT/bench_f32.txt
ncu --clock-control none $S --launch-skip 2 -c 1 $MC --no-check --only "8192x8192x8192 bf16 N" $P/libgpukit_matmul_sm90.so > $OUT/ncu_cublas_8192.txt 2>&1
ncu --clock-control none $S -k regex:sm90_gemm --launch-skip 2 -c 1 $MC --no-check --only "8192x8192x8192 bf16 N" $P/libgpukit_matmul_sm90.so > $OUT/ncu_sm90_8192.txt 2>&1
ncu --clock-control none $S $W --launch-skip 2 -c 1 $MC --no-check --only "4096x4096x4096 f32 N" $P/libgpukit_matmul_sm80.so > $OUT/ncu_cublas_f32.txt 2>&1
ncu --clock-control none $S $W -k regex:simt --launch-skip 2 -c 1 $MC --no-check --only "4096x4096x4096 f32 N" $P/libgpukit_matmul_sm80.so > $OUT/ncu_simt_f32.txt 2>&1
for f in $OUT/ncu_*.txt; do echo "== $f"; grep -E "^  [a-z_].*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|Registers Per|Achieved Occupancy|No Eligible|Issued Warp|Stall" $f | head -24; done
