// matmul_epilogue.cuh — the per-element tail every matmul kernel shares:
//   out = act(alpha · acc + beta · out_old + bias[n])
// and the batch-offset walk over collapsed batch dims. Device code only.
#ifndef GPUKIT_KERNELS_MATMUL_MATMUL_EPILOGUE_CUH_
#define GPUKIT_KERNELS_MATMUL_MATMUL_EPILOGUE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "matmul_problem.h"

namespace gk::matmul {

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// gelu is the erf form the op specifies unless the caller asked for "tanh".
template <typename Acc>
__device__ __forceinline__ Acc apply_activation(Acc x, Activation act, bool gelu_tanh) {
  switch (act) {
    case Activation::kRelu: return x > Acc(0) ? x : Acc(0);
    case Activation::kGelu:
      if (gelu_tanh) {
        const Acc c = Acc(0.7978845608028654);  // sqrt(2/pi)
        return Acc(0.5) * x * (Acc(1) + tanh(c * (x + Acc(0.044715) * x * x * x)));
      }
      return Acc(0.5) * x * (Acc(1) + erf(x * Acc(0.7071067811865476)));
    case Activation::kSilu: return x / (Acc(1) + exp(-x));
    default: return x;
  }
}

// What the epilogue needs besides the accumulator; passed to kernels by value.
struct EpilogueParams {
  float alpha;
  float beta;
  double alpha_f64;
  double beta_f64;
  const void* bias;  // in dtype, nullptr for none
  int64_t bias_s;
  Activation act;
  bool gelu_tanh;
};

inline EpilogueParams make_epilogue_params(const MatmulProblem& p) {
  EpilogueParams e;
  e.alpha = static_cast<float>(p.alpha);
  e.beta = static_cast<float>(p.beta);
  e.alpha_f64 = p.alpha;
  e.beta_f64 = p.beta;
  e.bias = p.has_bias ? p.bias : nullptr;
  e.bias_s = p.bias_s;
  e.act = p.act;
  e.gelu_tanh = p.gelu_tanh;
  return e;
}

// Element offsets of batch entry `idx` (row-major over the collapsed batch dims).
__device__ __forceinline__ void batch_offsets(const BatchLayout& bl, int64_t idx, int64_t* oa,
                                              int64_t* ob, int64_t* oc) {
  int64_t a = 0, b = 0, c = 0;
  for (int d = bl.ndim - 1; d >= 0; --d) {
    const int64_t i = idx % bl.shape[d];
    idx /= bl.shape[d];
    a += i * bl.a_stride[d];
    b += i * bl.b_stride[d];
    c += i * bl.c_stride[d];
  }
  *oa = a;
  *ob = b;
  *oc = c;
}

// out[off] = act(alpha·acc + beta·out[off] + bias[n]) for float accumulators.
template <typename InT, typename OutT>
__device__ __forceinline__ void store_epilogue(const EpilogueParams& ep, OutT* out, int64_t off,
                                               int64_t n, float acc) {
  float v = ep.alpha * acc;
  if (ep.beta != 0.0f) v += ep.beta * to_float(out[off]);
  if (ep.bias) v += to_float(static_cast<const InT*>(ep.bias)[n * ep.bias_s]);
  out[off] = from_float<OutT>(apply_activation(v, ep.act, ep.gelu_tanh));
}

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_MATMUL_EPILOGUE_CUH_
