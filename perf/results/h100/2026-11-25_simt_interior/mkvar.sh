# mkvar NAME BK MINBLOCKS
cd /work/main
name=$1; bk=$2; mb=$3

d=.probe/$name; mkdir -p $d
cp kernels/matmul/simt_gemm.cu kernels/matmul/sm80_tuning.h $d/
sed -i "/struct Sm80SimtTuning/,/};/{s/static constexpr int kBlockK = 8;/static constexpr int kBlockK = $bk;/;s/static constexpr int kMinBlocksPerSm = 2;/static constexpr int kMinBlocksPerSm = $mb;/;s/static constexpr int kGroupM = 8;/static constexpr int kGroupM = ${4:-8};/}" $d/sm80_tuning.h
grep -A8 "struct Sm80SimtTuning" $d/sm80_tuning.h | grep -E "kBlockK|kMinBlocks"
O=build-carry/plugins/matmul_sm80/CMakeFiles/gpukit_matmul_sm80.dir
nvcc -Dgpukit_matmul_sm80_EXPORTS -I$d -Ikernels/matmul -Iabi/include -O3 -DNDEBUG \
  --generate-code=arch=compute_90a,code=[sm_90a] -Xcompiler=-fPIC -Xcompiler=-fvisibility=hidden \
  -std=c++17 -Xptxas -v -x cu -c $d/simt_gemm.cu -o $d/simt_gemm.o 2>&1 | grep -A2 vec4 | grep -E "registers" | head -2
c++ -fPIC -O3 -shared -Wl,--no-undefined -Wl,-z,defs -o $d/libgpukit_matmul_sm80_$name.so \
  $O/plugin.cpp.o $O/__/__/kernels/matmul/sm80_gemm_mma.cu.o $d/simt_gemm.o \
  -L/usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib/libcudart_static.a -ldl -lrt -lpthread
rm $d/simt_gemm.o
