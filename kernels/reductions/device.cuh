// Device helpers of the reductions kernel family: dtype conversion, 16-byte vector
// access, NaN-propagating min/max, fixed-order warp/block trees, index arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common.cuh"

namespace gk::kernels::reductions {

// Index arithmetic for up to kMaxDims dims passed by value to kernels. dims are
// stored innermost first so decomposition walks them in order.
struct Dims {
  int n = 0;
  int64_t size[kMaxDims] = {};
};

// ---------------------------------------------------------------------------------
// Scalar conversion: all floating math runs in f32.
// ---------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ float to_f32(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// 16 bytes of T: the unit of every vectorised load and store.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

template <typename T>
__device__ __forceinline__ Vec16<T> load_vec(const T* p) {
  return *reinterpret_cast<const Vec16<T>*>(p);
}

// Streaming load for data read once (keeps L2 for what is re-read).
template <typename T>
__device__ __forceinline__ Vec16<T> load_vec_stream(const T* p) {
  Vec16<T> r;
  int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
  *reinterpret_cast<int4*>(&r) = raw;
  return r;
}

template <typename T>
__device__ __forceinline__ void store_vec(T* p, const Vec16<T>& v) {
  *reinterpret_cast<Vec16<T>*>(p) = v;
}

// NumPy semantics: NaN wins.
__device__ __forceinline__ float nan_max(float a, float b) {
  return (a > b || a != a) ? a : b;
}
__device__ __forceinline__ float nan_min(float a, float b) {
  return (a < b || a != a) ? a : b;
}

// ---------------------------------------------------------------------------------
// Fixed-order trees. The xor butterfly combines the same pairs in every lane, so all
// lanes hold bit-identical results; the block tree then reads the per-warp values
// in warp order. Neither depends on timing, so results repeat bit for bit.
// ---------------------------------------------------------------------------------
template <typename F>
__device__ __forceinline__ float warp_all_reduce(float v, F combine) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Every thread of the block gets the block-wide result. `scratch` holds 32 floats;
// the call begins and ends with a barrier so it can be called back to back.
template <typename F>
__device__ __forceinline__ float block_all_reduce(float v, F combine, float* scratch) {
  v = warp_all_reduce(v, combine);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int nwarps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < nwarps; ++w) r = combine(r, scratch[w]);
  return r;
}

struct AddOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return nan_max(a, b); }
};

// Offset of logical index `idx` (row-major over dims stored innermost first).
__device__ __forceinline__ int64_t offset_of(int64_t idx, const Dims& dims, const int64_t* strides) {
  int64_t off = 0;
  for (int d = 0; d < dims.n; ++d) {
    const int64_t q = idx / dims.size[d];
    off += (idx - q * dims.size[d]) * strides[d];
    idx = q;
  }
  return off;
}

}  // namespace gk::kernels::reductions
