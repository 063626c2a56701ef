// Helpers shared by the tensor-core attention kernels (attention_tc.cu on SM 80+,
// attention_sm90.cu on SM 90a): their shared-memory opt-in, asynchronous copies, f32 pairs as
// 16-bit register pairs, one tile of the online softmax over the accumulator layout of
// mma.sync and wgmma, and the output store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "llm/device.cuh"

namespace gk::kernels::llm {

// Lets kernel kKernel take `bytes` of dynamic shared memory on the current device. The limit
// is a per-device attribute of each kernel: set once per device (the first 64; beyond, on
// every call).
template <auto kKernel>
cudaError_t allow_shared_bytes(int bytes) {
  static std::atomic<uint64_t> devices_done{0};
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (devices_done.load(std::memory_order_relaxed) & bit) != 0) return cudaSuccess;
  e = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) devices_done.fetch_or(bit, std::memory_order_relaxed);
  return e;
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without a register round trip; zero-filled when !valid (src is
// then not read).
__device__ __forceinline__ void copy_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// 2^x in one MUFU instruction; denormal results flush to 0, which a softmax weight may.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two values as one register of T pairs, `lo` in the low half (the lower column).
template <class T>
__device__ __forceinline__ uint32_t pack(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One key tile of the online softmax for a lane's two rows (g and g + 8 of a 16-row block):
// s[n] holds columns 8 n + 2 t, 8 n + 2 t + 1 of both rows (e = 0, 1: row g; 2, 3: row g + 8),
// the layout of mma.sync's and wgmma's f32 accumulators. On return s holds p = 2^(s scale -
// m'), m the new row maxima (unscaled), l this lane's part of the row sums (the 4 lanes of a
// row sum theirs at the end) and correction the factor O must be multiplied by. When
// `any_masked` (a tile that reaches a row's last key, or holds a missing block), the
// elements with masked(8 n + (e & 1), e >> 1) are left out.
template <int kTiles, class Masked>
__device__ __forceinline__ void online_softmax(float (&s)[kTiles][4], float (&m)[2], float (&l)[2],
                                               float (&correction)[2], bool any_masked,
                                               const Masked& masked, float scale_log2) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1;
      if (any_masked && masked(n * 8 + (e & 1), r)) s[n][e] = -INFINITY;
      tile_max[r] = fmaxf(tile_max[r], s[n][e]);
    }
  }
  float shift[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = fmaxf(m[r], tile_max[r]);
    // A row that has seen no key yet subtracts 0: its p are 2^-inf = 0, never NaN.
    shift[r] = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
    correction[r] = exp2_approx(m[r] * scale_log2 - shift[r]);
    m[r] = m_new;
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1;
      s[n][e] = exp2_approx(fmaf(s[n][e], scale_log2, -shift[r]));
      sum[r] += s[n][e];
    }
  }
  l[0] = l[0] * correction[0] + sum[0];
  l[1] = l[1] * correction[1] + sum[1];
}

// Writes a lane's two rows of O [16, 8 kTiles] (the accumulator layout above) divided by
// their sums: `l` holds this lane's parts (summed over the row's 4 lanes here), query0 the
// query of row g; rows at or past Tq are not written, a row with no key gets 0. `row`
// points at query 0 of the (sequence, head); `pairs`: two neighbouring elements are one
// aligned 4-byte word, else elements are col_stride apart.
template <class T, int kTiles>
__device__ __forceinline__ void store_rows(const float (&o)[kTiles][4], const float (&l)[2],
                                           int64_t query0, int t, int64_t Tq, T* row,
                                           int64_t row_stride, int64_t col_stride, bool pairs) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t query = query0 + 8 * r;
    if (query >= Tq) continue;
    T* out = row + query * row_stride;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      const int d = n * 8 + 2 * t;
      const float lo = o[n][2 * r] * inv, hi = o[n][2 * r + 1] * inv;
      if (pairs) {
        *reinterpret_cast<uint32_t*>(out + d) = pack<T>(lo, hi);
      } else {
        out[d * col_stride] = from_f32<T>(lo);
        out[(d + 1) * col_stride] = from_f32<T>(hi);
      }
    }
  }
}

}  // namespace gk::kernels::llm
