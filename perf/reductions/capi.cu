// A C surface over kernels/reductions for ctypes (perf/reductions/bench_torch.py).
// Not part of the plugin; a tensor is passed as gk::kernels::reductions::TensorRef,
// whose layout is {void* data; int dtype; int ndim; int64 shape[8]; int64 strides[8]},
// dtype 0 f32, 1 f16, 2 bf16, 3 i32, 4 i64. Every function returns a cudaError_t.
//
// Build (repository root):
//   nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \
//     -I kernels perf/reductions/capi.cu kernels/reductions/*.cu -o /tmp/libgkred.so
#include "reductions/elementwise.cuh"
#include "reductions/norm.cuh"
#include "reductions/reduce.cuh"
#include "reductions/softmax.cuh"

namespace kr = gk::kernels::reductions;
using kr::TensorRef;

#define GKR_API extern "C" __attribute__((visibility("default")))

GKR_API int gkr_unary(int op, const TensorRef* x, const TensorRef* out, void* stream) {
  return kr::launch_unary(static_cast<kr::UnaryOp>(op), *x, *out, static_cast<cudaStream_t>(stream));
}

GKR_API int gkr_binary(int op, const TensorRef* a, const TensorRef* b, const TensorRef* out,
                       void* stream) {
  return kr::launch_binary(static_cast<kr::BinaryOp>(op), *a, *b, *out,
                           static_cast<cudaStream_t>(stream));
}

GKR_API int gkr_cast(const TensorRef* x, const TensorRef* out, void* stream) {
  return kr::launch_cast(*x, *out, static_cast<cudaStream_t>(stream));
}

GKR_API unsigned long long gkr_reduce_workspace(int op, const TensorRef* x, unsigned mask,
                                                const TensorRef* out) {
  return kr::reduce_workspace_bytes(static_cast<kr::ReduceOp>(op), *x, mask, *out);
}

GKR_API int gkr_reduce(int op, const TensorRef* x, unsigned mask, const TensorRef* out, void* ws,
                       void* stream) {
  return kr::launch_reduce(static_cast<kr::ReduceOp>(op), *x, mask, *out, ws,
                           static_cast<cudaStream_t>(stream));
}

GKR_API unsigned long long gkr_softmax_workspace(const TensorRef* x, int axis, const TensorRef* out) {
  return kr::softmax_workspace_bytes(*x, axis, *out);
}

GKR_API int gkr_softmax(const TensorRef* x, int axis, int log, const TensorRef* out, void* ws,
                        void* stream) {
  return kr::launch_softmax(*x, axis, log != 0, *out, ws, static_cast<cudaStream_t>(stream));
}

static kr::NormArgs norm_args(const TensorRef* x, const TensorRef* res, const TensorRef* w,
                              const TensorRef* b, const TensorRef* out, const TensorRef* sum,
                              float eps, int rms) {
  kr::NormArgs a;
  a.x = *x;
  a.residual = res;
  a.weight = w;
  a.bias = b;
  a.out = *out;
  a.sum = sum;
  a.eps = eps;
  a.rms = rms != 0;
  return a;
}

GKR_API unsigned long long gkr_norm_workspace(const TensorRef* x, const TensorRef* res,
                                              const TensorRef* w, const TensorRef* b,
                                              const TensorRef* out, const TensorRef* sum, float eps,
                                              int rms) {
  return kr::norm_workspace_bytes(norm_args(x, res, w, b, out, sum, eps, rms));
}

GKR_API int gkr_norm(const TensorRef* x, const TensorRef* res, const TensorRef* w,
                     const TensorRef* b, const TensorRef* out, const TensorRef* sum, float eps,
                     int rms, void* ws, void* stream) {
  return kr::launch_norm(norm_args(x, res, w, b, out, sum, eps, rms), ws,
                         static_cast<cudaStream_t>(stream));
}
