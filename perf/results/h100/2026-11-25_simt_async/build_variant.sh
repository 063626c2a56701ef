#!/bin/bash
# build_variant.sh NAME BLOCK_N: a matmul_sm80 plugin whose simt_gemm.cu uses
# Sm80SimtAsyncTuning::kBlockN = BLOCK_N, linked with build-carry's other objects.
set -e
name=$1; bn=$2
d=.probe/$name; mkdir -p $d
cp kernels/matmul/simt_gemm.cu kernels/matmul/sm80_tuning.h $d/
sed -i "s/static constexpr int kBlockN = 256;/static constexpr int kBlockN = $bn;/" $d/sm80_tuning.h
grep -A3 "struct Sm80SimtAsyncTuning" $d/sm80_tuning.h | grep kBlockN
O=build-carry/plugins/matmul_sm80/CMakeFiles/gpukit_matmul_sm80.dir
nvcc -Dgpukit_matmul_sm80_EXPORTS -I$d -Ikernels/matmul -Iabi/include -O3 -DNDEBUG \
  --generate-code=arch=compute_90a,code=[sm_90a] -Xcompiler=-fPIC -Xcompiler=-fvisibility=hidden \
  -std=c++17 -Xptxas -v -x cu -c $d/simt_gemm.cu -o $d/simt_gemm.o 2>&1 | grep -A2 async_kernel | grep -E "registers|spill"
c++ -fPIC -O3 -shared -Wl,--no-undefined -Wl,-z,defs -o $d/libgpukit_matmul_sm80_$name.so \
  $O/plugin.cpp.o $O/__/__/kernels/matmul/sm80_gemm_mma.cu.o $d/simt_gemm.o \
  -L/usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib/libcudart_static.a -ldl -lrt -lpthread
rm $d/simt_gemm.o
