// gemv.cu — see gemv.cuh.
#include "gemv.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "matmul_epilogue.cuh"
#include "mma_sync.cuh"

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

// Skinny products (2 ≤ M ≤ kGemvMaxRows): tensor cores, each weight read once. A block owns
// kSkinnyCols output columns (one mma n-tile) for every row of `a` (up to 4 m-tiles of 16),
// and its warps split K. Per 32-element block of K, lane (g = lane / 4, j = lane % 4) loads
// 16 bytes of weight row g at K offset 8 j, and the same 16 bytes of `a` rows g and g + 8:
// read as two m16n8k16 steps over a permuted K (both operands permuted alike), they are
// exactly the lane's A and B fragments, so nothing passes through shared memory.
constexpr int kSkinnyWarps = 4;     // warps of a block, each a quarter of K
constexpr int kSkinnyCols = 8;      // a block's output columns
constexpr int kSkinnyInFlight = 4;  // 16-byte weight loads each lane issues before using them

struct SkinnyParams {
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k;
  int64_t a_sm, b_sn, c_sm, c_sn;
  EpilogueParams ep;
};

template <typename T, typename OutT, int kTiles>
__global__ void __launch_bounds__(kSkinnyWarps * 32) skinny_kernel(SkinnyParams p) {
  __shared__ float partial[kSkinnyWarps - 1][kTiles][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, j = lane & 3;
  const int64_t col = int64_t(blockIdx.x) * kSkinnyCols + g;  // the weight row this lane reads
  const bool col_in = col < p.n;
  const uint4* w =
      reinterpret_cast<const uint4*>(static_cast<const T*>(p.b) + (col_in ? col : 0) * p.b_sn);
  const uint4* rows[kTiles][2];
  bool row_in[kTiles][2];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = t * 16 + h * 8 + g;
      row_in[t][h] = r < p.m;
      rows[t][h] = reinterpret_cast<const uint4*>(static_cast<const T*>(p.a) +
                                                  (row_in[t][h] ? r : 0) * p.a_sm);
    }
  }
  const int64_t chunks = p.k / kChunk;  // 16-byte chunks of a row
  const int64_t kblocks = (chunks + 3) / 4;
  float acc[kTiles][4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t first = warp; first < kblocks; first += kSkinnyWarps * kSkinnyInFlight) {
    uint4 wv[kSkinnyInFlight];
#pragma unroll
    for (int i = 0; i < kSkinnyInFlight; ++i) {
      const int64_t c = (first + int64_t(i) * kSkinnyWarps) * 4 + j;
      wv[i] = col_in && c < chunks ? __ldcs(w + c) : zero;
    }
#pragma unroll
    for (int i = 0; i < kSkinnyInFlight; ++i) {
      const int64_t c = (first + int64_t(i) * kSkinnyWarps) * 4 + j;
      if (first + int64_t(i) * kSkinnyWarps >= kblocks) break;
      const uint32_t b0[2] = {wv[i].x, wv[i].y}, b1[2] = {wv[i].z, wv[i].w};
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const uint4 lo = row_in[t][0] && c < chunks ? __ldg(rows[t][0] + c) : zero;
        const uint4 hi = row_in[t][1] && c < chunks ? __ldg(rows[t][1] + c) : zero;
        const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
        mma_sync<T>(acc[t], a0, b0);
        mma_sync<T>(acc[t], a1, b1);
      }
    }
  }
  // Warps 1.. leave their K shares in shared memory; warp 0 adds them and writes.
  if (warp > 0) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp - 1][t][e][lane] = acc[t][e];
    }
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[t][e];
#pragma unroll
      for (int x = 0; x < kSkinnyWarps - 1; ++x) v += partial[x][t][e][lane];
      // Accumulator e holds row g (+ 8 for e >= 2), column 2 j + (e & 1) of the tile.
      const int64_t r = t * 16 + g + (e >> 1) * 8;
      const int64_t n = int64_t(blockIdx.x) * kSkinnyCols + 2 * j + (e & 1);
      if (r < p.m && n < p.n) {
        store_epilogue<T, OutT>(p.ep, static_cast<OutT*>(p.c), r * p.c_sm + n * p.c_sn, n, v);
      }
    }
  }
}

template <typename T, typename OutT>
cudaError_t launch_skinny(const SkinnyParams& sp, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((sp.n + kSkinnyCols - 1) / kSkinnyCols));
  const dim3 block(kSkinnyWarps * 32);
  switch ((sp.m + 15) / 16) {
    case 1:
      skinny_kernel<T, OutT, 1><<<grid, block, 0, stream>>>(sp);
      break;
    case 2:
      skinny_kernel<T, OutT, 2><<<grid, block, 0, stream>>>(sp);
      break;
    case 3:
      skinny_kernel<T, OutT, 3><<<grid, block, 0, stream>>>(sp);
      break;
    default:
      skinny_kernel<T, OutT, 4><<<grid, block, 0, stream>>>(sp);
      break;
  }
  return cudaGetLastError();
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

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
  if (p.m > 1 && !(p.has_bias && p.out_dtype == GK_DTYPE_F32)) {
    // cuBLASLt's tile GEMMs serve the rest faster (docs/kernels/matmul.md, "gemv").
    *why =
        "from 2 rows gemv serves only a bias in the input dtype with f32 out, which "
        "cuBLASLt declines";
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
  const bool f32_out = p.out_dtype == GK_DTYPE_F32;
  if (p.m > 1) {
    const SkinnyParams sp{
        p.a, p.b, p.c, p.m, p.n, p.k, p.a_sm, p.b_sn, p.c_sm, p.c_sn, make_epilogue_params(p)};
    if (p.in_dtype == GK_DTYPE_BF16) {
      return f32_out ? launch_skinny<__nv_bfloat16, float>(sp, stream)
                     : launch_skinny<__nv_bfloat16, __nv_bfloat16>(sp, stream);
    }
    return f32_out ? launch_skinny<__half, float>(sp, stream)
                   : launch_skinny<__half, __half>(sp, stream);
  }
  GemvParams gp{p.a, p.b, p.c, p.n, p.k, p.b_sn, p.c_sn, make_epilogue_params(p)};
  if (p.in_dtype == GK_DTYPE_BF16) {
    return f32_out ? launch_typed<__nv_bfloat16, float>(gp, sm_count, stream)
                   : launch_typed<__nv_bfloat16, __nv_bfloat16>(gp, sm_count, stream);
  }
  return f32_out ? launch_typed<__half, float>(gp, sm_count, stream)
                 : launch_typed<__half, __half>(gp, sm_count, stream);
}

}  // namespace gk::matmul
