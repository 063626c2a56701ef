# redvar.sh F: reductions plugin whose all-element split uses 1584*F chunks (kMaxPartials 8192)
set -e
F=$1; d=.probe/redvar_$F; mkdir -p $d
cp kernels/reductions/*.cu kernels/reductions/*.cuh $d/
sed -i "s/chunks = ceil_div(kRowSplitChunks, plan->m);/chunks = ceil_div(kRowSplitChunks * $F, plan->m);/" $d/reduce.cu
sed -i "s/inline constexpr int kMaxPartials = 2048;/inline constexpr int kMaxPartials = 8192;/" $d/tuning.cuh
grep -c "kRowSplitChunks \* $F" $d/reduce.cu; grep "kMaxPartials = " $d/tuning.cuh
O=build-carry/plugins/reductions_cuda/CMakeFiles/gpukit_reductions_cuda.dir
nvcc -Dgpukit_reductions_cuda_EXPORTS -I$d -Ikernels -Iabi/include -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[sm_90a] -Xcompiler=-fPIC -Xcompiler=-fvisibility=hidden -std=c++17 -x cu -c $d/reduce.cu -o $d/reduce.o
c++ -fPIC -O3 -shared -Wl,--no-undefined -Wl,-z,defs -o $d/libgpukit_reductions_cuda.so $O/plugin.cpp.o $O/glue.cpp.o $O/elementwise_glue.cpp.o $O/reduce_glue.cpp.o $O/softmax_glue.cpp.o $O/norm_glue.cpp.o $O/__/__/kernels/reductions/elementwise.cu.o $d/reduce.o $O/__/__/kernels/reductions/softmax.cu.o $O/__/__/kernels/reductions/norm.cu.o -L/usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib/libcudart_static.a -ldl -lrt -lpthread
rm -f $d/reduce.o $d/*.cu $d/*.cuh; ls -la $d
