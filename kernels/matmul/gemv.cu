// gemv.cu — see gemv.cuh.
#include "gemv.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "matmul_epilogue.cuh"

namespace gk::matmul {
namespace {

constexpr int kWarps = 8;        // warps per block; each computes whole output columns
constexpr int kChunk = 8;        // elements per 16-byte load
constexpr int kInFlight = 8;     // 16-byte weight loads each lane issues before using them
constexpr int kBlocksPerSm = 4;  // resident at 64 registers a thread

template <typename T>
__device__ __forceinline__ void unpack(const uint4& v, float (&f)[kChunk]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __bfloat1622float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  } else {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __half22float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
}

struct GemvParams {
  const void* a;  // the one row of a, K-contiguous
  const void* b;
  void* c;
  int64_t n, k;
  int64_t b_sn, c_sn;
  EpilogueParams ep;
};

// One warp's output column `col`: its weight row streamed in 16-byte loads past L1 (read
// once: ld.global.cs), loads issued before any is used, times the row of `a`.
template <typename T, typename OutT>
__device__ __forceinline__ void gemv_column(const GemvParams& p, int64_t col, int lane) {
  const uint4* w = reinterpret_cast<const uint4*>(static_cast<const T*>(p.b) + col * p.b_sn);
  const uint4* a = static_cast<const uint4*>(p.a);
  const int64_t chunks = p.k / kChunk;
  float acc = 0.0f;

  for (int64_t base = lane; base < chunks; base += 32 * kInFlight) {
    uint4 wv[kInFlight];
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int64_t c = base + int64_t(i) * 32;
      wv[i] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int64_t c = base + int64_t(i) * 32;
      if (c >= chunks) break;
      float wf[kChunk];
      unpack<T>(wv[i], wf);
      float af[kChunk];
      unpack<T>(__ldg(a + c), af);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) acc = fmaf(af[j], wf[j], acc);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    store_epilogue<T, OutT>(p.ep, static_cast<OutT*>(p.c), col * p.c_sn, col, acc);
  }
}

// kWarps warps a block; each warp walks columns with the grid's stride, so that the grid is
// at most kBlocksPerSm resident blocks per SM for any N.
template <typename T, typename OutT>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemvParams p) {
  const int lane = threadIdx.x & 31;
  for (int64_t col = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); col < p.n;
       col += int64_t(gridDim.x) * kWarps) {
    gemv_column<T, OutT>(p, col, lane);
  }
}

template <typename T, typename OutT>
cudaError_t launch_typed(const GemvParams& gp, int sm_count, cudaStream_t stream) {
  const int64_t blocks =
      std::min<int64_t>((gp.n + kWarps - 1) / kWarps, int64_t(sm_count) * kBlocksPerSm);
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(kWarps * 32);
  gemv_kernel<T, OutT><<<grid, block, 0, stream>>>(gp);
  return cudaGetLastError();
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool gemv_can_implement(const MatmulProblem& p, std::string* why) {
  if (p.b_dtype != p.in_dtype) {
    *why = "gemv needs b in a's dtype (gemv_quant reads block-quantized b)";
    return false;
  }
  if (p.in_dtype != GK_DTYPE_BF16 && p.in_dtype != GK_DTYPE_F16) {
    *why = "gemv serves bf16 and f16 inputs only";
    return false;
  }
  if (p.out_dtype != p.in_dtype && p.out_dtype != GK_DTYPE_F32) {
    *why = "gemv writes out in the input dtype or f32";
    return false;
  }
  if (p.m < 1 || p.m > kGemvMaxRows) {
    *why = "M = " + std::to_string(p.m) + " is not in 1.." + std::to_string(kGemvMaxRows) +
           " (gemv is for skinny products)";
    return false;
  }
  if (p.batch.ndim != 0) {
    *why = "gemv takes no batch dims";
    return false;
  }
  if (p.b_sk != 1 || p.a_sk != 1) {
    *why = "gemv needs a and b contiguous along K (b as [N, K] with transpose_b)";
    return false;
  }
  if (p.k % 8 != 0 || p.b_sn % 8 != 0 || (p.m > 1 && p.a_sm % 8 != 0) || !aligned16(p.a) ||
      !aligned16(p.b)) {
    *why = "gemv needs K, the row strides of a and b, and both base addresses 16-byte aligned";
    return false;
  }
  return true;
}

cudaError_t gemv_run(const MatmulProblem& p, int sm_count, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  GemvParams gp{p.a, p.b, p.c, p.n, p.k, p.b_sn, p.c_sn, make_epilogue_params(p)};
  const bool f32_out = p.out_dtype == GK_DTYPE_F32;
  if (p.in_dtype == GK_DTYPE_BF16) {
    return f32_out ? launch_typed<__nv_bfloat16, float>(gp, sm_count, stream)
                   : launch_typed<__nv_bfloat16, __nv_bfloat16>(gp, sm_count, stream);
  }
  return f32_out ? launch_typed<__half, float>(gp, sm_count, stream)
                 : launch_typed<__half, __half>(gp, sm_count, stream);
}

}  // namespace gk::matmul
