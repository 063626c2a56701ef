// matmul_problem.h — one matmul call reduced to numbers the kernels take.
//
// The op (docs/ops.md) is out = act(alpha · op(a) · op(b) + beta · out + bias) over
// broadcast batch dims. Every plugin that serves it first turns its call into a
// MatmulProblem (plugins/matmul_call.h): M, N, K, one (row, column) stride pair per
// matrix, and the batch dims collapsed as far as the three tensors' strides allow.
// Transposes become strides, so the kernels never see a transpose flag. Host-only; no CUDA
// types and no plugin ABI.
#ifndef GPUKIT_KERNELS_MATMUL_MATMUL_PROBLEM_H_
#define GPUKIT_KERNELS_MATMUL_MATMUL_PROBLEM_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "gpukit/gpukit_tensor.h"  // gk_dtype, GK_MAX_DIMS

namespace gk::matmul {

enum class Activation : int32_t { kNone = 0, kRelu = 1, kGelu = 2, kSilu = 3 };

// Batch dims left after collapsing: out has at most GK_MAX_DIMS - 2 of them.
inline constexpr int kMaxBatchDims = GK_MAX_DIMS - 2;

// Element offsets of one batch entry in a, b and out. Passed to kernels by value.
struct BatchLayout {
  int32_t ndim = 0;  // 0: a single matrix
  int64_t shape[kMaxBatchDims] = {};
  int64_t a_stride[kMaxBatchDims] = {};  // 0 where a broadcasts
  int64_t b_stride[kMaxBatchDims] = {};
  int64_t c_stride[kMaxBatchDims] = {};
};

struct MatmulProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch_count = 1;
  BatchLayout batch;
  // Element strides of a (M×K view), b (K×N view), out (M×N) and bias.
  int64_t a_sm = 0, a_sk = 0, b_sk = 0, b_sn = 0, c_sm = 0, c_sn = 0, bias_s = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;  // nullptr: no bias
  void* c = nullptr;
  bool has_bias = false;
  int32_t in_dtype = 0;   // a, b and bias (gk_dtype)
  int32_t out_dtype = 0;  // in_dtype, or f32 for f16/bf16 inputs
  // b's dtype: in_dtype, or a block-quantized one (q8_0 ...: b is [N, K] packed along K,
  // strides in elements, out f32; see gemv_quant.cuh). Kernels for plain b check it.
  int32_t b_dtype = 0;
  double alpha = 1.0, beta = 0.0;
  Activation act = Activation::kNone;
  bool gelu_tanh = false;  // only when the caller passed approximate="tanh"
  bool allow_tf32 = false;
};

inline size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F64: return 8;
    case GK_DTYPE_F32: return 4;
    case GK_DTYPE_F16:
    case GK_DTYPE_BF16: return 2;
    default: return 0;
  }
}

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_MATMUL_PROBLEM_H_
