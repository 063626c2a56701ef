// Device helpers of the llm kernels: element load/store in f32 for f32, f16 and bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "llm/common.cuh"

namespace gk::kernels::llm {

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Calls f(T{}) with the storage type of a floating dtype; false for any other dtype.
template <class F>
bool visit_floating(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return true;
    case DType::f16: f(__half{}); return true;
    case DType::bf16: f(__nv_bfloat16{}); return true;
    default: return false;
  }
}

}  // namespace gk::kernels::llm
