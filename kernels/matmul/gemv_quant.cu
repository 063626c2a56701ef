// gemv_quant.cu — see gemv_quant.cuh.
#include "gemv_quant.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "gpukit/gpukit_weights.h"  // GK_DTYPE_Q8_0 ... (block-quantized dtypes)
#include "matmul_epilogue.cuh"

namespace gk::matmul {
namespace {

constexpr int kWarps = 4;         // per CTA: N = 576 weight rows still make 144 CTAs
constexpr int kCtasPerSm = 8;     // grid cap; shared memory and registers set the residency
constexpr int kItemsPerLane = 2;  // blocks (q4_k: 64-element quarters) a lane decodes a chunk
constexpr int kGroup = 32;        // elements of a's groups, of a block, of a q4_k group
constexpr int kGroupStride = 36;  // floats per group in shared memory: 32 values, sum, 3 pad
// Shared memory for a's rows and the warps' slices; above 48 KB the kernel opts in.
constexpr size_t kSmemBudget = 96 * 1024;

// Exact small integers from their bits: 2^23 + x is a float whose low mantissa bits are x.
constexpr uint32_t kMagic = 0x4B000000u;
constexpr float kMagicF = 8388608.0f;

template <int32_t Q>
struct Format;
template <>
struct Format<GK_DTYPE_Q8_0> {
  static constexpr int kBlock = 32, kBytes = 34, kChunkBlocks = 64;
};
template <>
struct Format<GK_DTYPE_Q4_0> {
  static constexpr int kBlock = 32, kBytes = 18, kChunkBlocks = 64;
};
template <>
struct Format<GK_DTYPE_Q4_1> {
  static constexpr int kBlock = 32, kBytes = 20, kChunkBlocks = 64;
};
template <>
struct Format<GK_DTYPE_Q4_K> {
  static constexpr int kBlock = 256, kBytes = 144, kChunkBlocks = 16;
};

// 16-byte loads per lane for one chunk: its bytes, plus a segment on each side where the
// chunk starts and ends inside one.
template <int32_t Q>
constexpr int kLoadsPerLane = (Format<Q>::kChunkBlocks * Format<Q>::kBytes / 16 + 2 + 31) / 32;

template <int32_t Q>
constexpr size_t kWarpSliceBytes = size_t(kLoadsPerLane<Q>) * 32 * 16;

__host__ __device__ __forceinline__ int64_t padded_k(int64_t k) {
  return k / kGroup * kGroupStride;
}

struct QuantParams {
  const uint8_t* b;  // packed [N, K], 16-byte aligned
  const void* a;     // this pass's first row of a, K-contiguous
  float* c;          // this pass's first row of out
  const void* bias;  // a's dtype; nullptr for none
  int64_t n, k;
  int64_t a_sm, c_sm, c_sn, bias_s;
  int32_t rows;  // rows of a in this pass (at most MR)
  int32_t a_dtype;
  float alpha, beta;
  Activation act;
  bool gelu_tanh;
};

__device__ __forceinline__ int64_t min64(int64_t x, int64_t y) {
  return x < y ? x : y;
}

__device__ __forceinline__ float load_as_float(const void* p, int32_t dtype, int64_t i) {
  if (dtype == GK_DTYPE_F32) return static_cast<const float*>(p)[i];
  if (dtype == GK_DTYPE_F16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ float half_bits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}

// x in [0, 2^23) as a float, minus `bias` (kMagicF + the format's offset), exactly.
__device__ __forceinline__ float small_int(uint32_t x, float bias) {
  return __uint_as_float(kMagic | x) - bias;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// a's rows [0, MR) as f32 in shared memory, groups of 32 padded to 36 floats with the group's
// sum at float 32 when the format has a min term (kSums); rows past p.rows are zeros. The
// loads go out back to back, with no shuffle between them, and one thread per group sums it
// afterwards: staging costs a CTA about one memory latency, not one per 128 elements (a CTA
// of a 1B model's projection serves only a few weight rows, so this is most of its time).
template <int MR, bool kSums>
__device__ __forceinline__ void stage_a(const QuantParams& p, float* as, int64_t kpad) {
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    float* row = as + m * kpad;
    if (m < p.rows) {
#pragma unroll 8
      for (int64_t kk = threadIdx.x; kk < p.k; kk += blockDim.x) {
        row[(kk / kGroup) * kGroupStride + kk % kGroup] =
            load_as_float(p.a, p.a_dtype, m * p.a_sm + kk);
      }
    } else {
      for (int64_t kk = threadIdx.x; kk < kpad; kk += blockDim.x) row[kk] = 0.0f;
    }
  }
  __syncthreads();
  if constexpr (kSums) {
    // Rows are kpad = (K / 32) * 36 floats apart, so group g of all rows is at g * 36.
    const int64_t groups = int64_t(MR) * (p.k / kGroup);
    for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
      float* group = as + g * kGroupStride;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kGroup; ++i) sum += group[i];
      group[kGroup] = sum;
    }
    __syncthreads();
  }
}

// Loads chunk `chunk` of weight row `row` (its 16-byte segments) into regs; returns the
// offset of the chunk's first byte in its first segment.
template <int32_t Q, int L>
__device__ __forceinline__ int load_chunk(const uint8_t* b, int64_t row_bytes,
                                          int64_t blocks_per_row, int64_t row, int64_t chunk,
                                          int lane, uint4 (&regs)[L]) {
  using F = Format<Q>;
  const int64_t first = chunk * F::kChunkBlocks;
  const int64_t count = min64(F::kChunkBlocks, blocks_per_row - first);
  const int64_t s = row * row_bytes + first * F::kBytes;
  const int64_t e = s + count * F::kBytes;
  const int64_t s0 = s & ~int64_t(15);
  const int segments = int((e - s0 + 15) >> 4);
  const uint4* src = reinterpret_cast<const uint4*>(b + s0);
#pragma unroll
  for (int i = 0; i < L; ++i) {
    const int seg = lane + 32 * i;
    regs[i] = seg < segments ? __ldcs(src + seg) : make_uint4(0, 0, 0, 0);
  }
  return int(s - s0);
}

// acc[m] += scale · Σ_j a[m, group j] · q[j] + offset · Σ_j a[m, group j].
template <int MR>
__device__ __forceinline__ void dot_group(const float* as, int64_t kpad, int64_t group,
                                          const float (&q)[32], float scale, float offset,
                                          float (&acc)[MR]) {
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const float* x = as + m * kpad + group * kGroupStride;
    float s = 0.0f;
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float4 a4 = *reinterpret_cast<const float4*>(x + 4 * t);
      s = fmaf(a4.x, q[4 * t], s);
      s = fmaf(a4.y, q[4 * t + 1], s);
      s = fmaf(a4.z, q[4 * t + 2], s);
      s = fmaf(a4.w, q[4 * t + 3], s);
    }
    acc[m] = fmaf(scale, s, acc[m]);
    if (offset != 0.0f) acc[m] = fmaf(offset, x[kGroup], acc[m]);
  }
}

// One 32-element block of q8_0 / q4_0 / q4_1 at `q` (2-byte aligned in shared memory).
template <int32_t Q, int MR>
__device__ __forceinline__ void decode_block(const uint8_t* q, const float* as, int64_t kpad,
                                             int64_t group, float (&acc)[MR]) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(q);
  float v[32];
  const float d = half_bits(h[0]);
  float offset = 0.0f;
  if constexpr (Q == GK_DTYPE_Q8_0) {
    // i8 q: (q xor 0x80) is q + 128 as a byte.
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t u = uint32_t(h[1 + i]) ^ 0x8080u;
      v[2 * i] = small_int(u & 0xffu, kMagicF + 128.0f);
      v[2 * i + 1] = small_int(u >> 8, kMagicF + 128.0f);
    }
  } else {
    // Byte j holds element j (low nibble) and j + 16 (high nibble).
    const int first = Q == GK_DTYPE_Q4_1 ? 2 : 1;
    const float bias = Q == GK_DTYPE_Q4_1 ? kMagicF : kMagicF + 8.0f;
    if constexpr (Q == GK_DTYPE_Q4_1) offset = half_bits(h[1]);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t u = h[first + i];
      v[2 * i] = small_int(u & 0xfu, bias);
      v[2 * i + 16] = small_int((u >> 4) & 0xfu, bias);
      v[2 * i + 1] = small_int((u >> 8) & 0xfu, bias);
      v[2 * i + 17] = small_int((u >> 12) & 0xfu, bias);
    }
  }
  dot_group<MR>(as, kpad, group, v, d, offset, acc);
}

__device__ __forceinline__ uint32_t scale_byte(const uint4& hdr, int i) {
  const uint32_t w = i < 4 ? hdr.y : (i < 8 ? hdr.z : hdr.w);
  return (w >> (8 * (i & 3))) & 0xffu;
}

// Groups 2·pair and 2·pair + 1 of the q4_k super-block at `blk` (16-byte aligned): the 32
// bytes they share hold group 2·pair in their low nibbles and 2·pair + 1 in their high ones.
template <int MR>
__device__ __forceinline__ void decode_q4_k(const uint8_t* blk, int pair, const float* as,
                                            int64_t kpad, int64_t first_group, float (&acc)[MR]) {
  const uint4 hdr = *reinterpret_cast<const uint4*>(blk);
  const float d = half_bits(hdr.x);
  const float dmin = half_bits(hdr.x >> 16);
  const uint4 q0 = *reinterpret_cast<const uint4*>(blk + 16 + 32 * pair);
  const uint4 q1 = *reinterpret_cast<const uint4*>(blk + 32 + 32 * pair);
  const uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int g = 2 * pair + half;
    uint32_t sc, mn;
    if (g < 4) {
      sc = scale_byte(hdr, g) & 63u;
      mn = scale_byte(hdr, g + 4) & 63u;
    } else {
      sc = (scale_byte(hdr, g + 4) & 0xfu) | ((scale_byte(hdr, g - 4) >> 6) << 4);
      mn = (scale_byte(hdr, g + 4) >> 4) | ((scale_byte(hdr, g) >> 6) << 4);
    }
    const float dl = __fmul_rn(d, float(sc));
    const float ml = __fmul_rn(dmin, float(mn));
    float v[32];
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      v[l] = small_int((w[l / 4] >> (8 * (l % 4) + 4 * half)) & 0xfu, kMagicF);
    }
    dot_group<MR>(as, kpad, first_group + g, v, dl, -ml, acc);
  }
}

template <int32_t Q, int MR>
__global__ void __launch_bounds__(kWarps * 32) gemv_quant_kernel(QuantParams p) {
  using F = Format<Q>;
  constexpr int L = kLoadsPerLane<Q>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t kpad = padded_k(p.k);
  float* as = reinterpret_cast<float*>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint4* slice = reinterpret_cast<uint4*>(smem + MR * kpad * sizeof(float)) + warp * L * 32;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(slice);

  const int64_t blocks_per_row = p.k / F::kBlock;
  const int64_t row_bytes = blocks_per_row * F::kBytes;
  const int64_t chunks_per_row = (blocks_per_row + F::kChunkBlocks - 1) / F::kChunkBlocks;
  const int64_t row_step = int64_t(gridDim.x) * kWarps;
  int64_t row = int64_t(blockIdx.x) * kWarps + warp;

  // The first chunk's loads go out before a is staged: they do not depend on it.
  int64_t chunk = 0;
  uint4 regs[L];
  int delta = 0;
  if (row < p.n) delta = load_chunk<Q, L>(p.b, row_bytes, blocks_per_row, row, chunk, lane, regs);

  stage_a<MR, Q == GK_DTYPE_Q4_1 || Q == GK_DTYPE_Q4_K>(p, as, kpad);
  if (row >= p.n) return;  // no barrier follows
  float acc[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) acc[m] = 0.0f;

  while (true) {
    __syncwarp();  // every lane is done reading the previous chunk
#pragma unroll
    for (int i = 0; i < L; ++i) slice[lane + 32 * i] = regs[i];
    __syncwarp();

    // Issue the next chunk's loads (this row's, or the warp's next row's) before decoding.
    int64_t next_row = row, next_chunk = chunk + 1;
    if (next_chunk == chunks_per_row) {
      next_row += row_step;
      next_chunk = 0;
    }
    int next_delta = 0;
    if (next_row < p.n) {
      next_delta =
          load_chunk<Q, L>(p.b, row_bytes, blocks_per_row, next_row, next_chunk, lane, regs);
    }

    const int64_t first_block = chunk * F::kChunkBlocks;
    const int count = int(min64(F::kChunkBlocks, blocks_per_row - first_block));
    if constexpr (Q == GK_DTYPE_Q4_K) {
#pragma unroll
      for (int it = 0; it < kItemsPerLane; ++it) {
        const int item = lane + 32 * it;  // super-block item / 4, groups 2·(item % 4) + {0, 1}
        if (item < 4 * count) {
          decode_q4_k<MR>(bytes + (item / 4) * F::kBytes, item % 4, as, kpad,
                          (first_block + item / 4) * (F::kBlock / kGroup), acc);
        }
      }
    } else {
#pragma unroll
      for (int it = 0; it < kItemsPerLane; ++it) {
        const int blk = lane + 32 * it;
        if (blk < count) {
          decode_block<Q, MR>(bytes + delta + blk * F::kBytes, as, kpad, first_block + blk, acc);
        }
      }
    }

    if (chunk == chunks_per_row - 1) {
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const float total = warp_sum(acc[m]);
        acc[m] = 0.0f;
        if (lane == 0 && m < p.rows) {
          float* out = p.c + m * p.c_sm + row * p.c_sn;
          float v = p.alpha * total;
          if (p.beta != 0.0f) v += p.beta * *out;
          if (p.bias) v += load_as_float(p.bias, p.a_dtype, row * p.bias_s);
          *out = apply_activation(v, p.act, p.gelu_tanh);
        }
      }
    }
    if (next_row >= p.n) break;
    row = next_row;
    chunk = next_chunk;
    delta = next_delta;
  }
}

template <int32_t Q>
int max_rows(int64_t k) {
  const size_t per_row = size_t(padded_k(k)) * sizeof(float);
  const size_t slices = kWarpSliceBytes<Q> * kWarps;
  if (slices + per_row > kSmemBudget) return 0;
  return int(std::min<size_t>(8, (kSmemBudget - slices) / per_row));
}

int max_rows_of(int32_t dtype, int64_t k) {
  switch (dtype) {
    case GK_DTYPE_Q8_0:
      return max_rows<GK_DTYPE_Q8_0>(k);
    case GK_DTYPE_Q4_0:
      return max_rows<GK_DTYPE_Q4_0>(k);
    case GK_DTYPE_Q4_1:
      return max_rows<GK_DTYPE_Q4_1>(k);
    case GK_DTYPE_Q4_K:
      return max_rows<GK_DTYPE_Q4_K>(k);
    default:
      return 0;
  }
}

template <int32_t Q, int MR>
cudaError_t launch(const QuantParams& qp, unsigned grid, cudaStream_t stream) {
  const size_t smem = size_t(MR) * padded_k(qp.k) * sizeof(float) + kWarpSliceBytes<Q> * kWarps;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        gemv_quant_kernel<Q, MR>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  gemv_quant_kernel<Q, MR><<<grid, kWarps * 32, smem, stream>>>(qp);
  return cudaGetLastError();
}

template <int32_t Q>
cudaError_t run_typed(const MatmulProblem& p, int sm_count, cudaStream_t stream) {
  const int cap = max_rows<Q>(p.k);
  const int mr_cap = cap >= 8 ? 8 : cap >= 4 ? 4 : cap >= 2 ? 2 : 1;
  const int64_t blocks =
      std::min<int64_t>((p.n + kWarps - 1) / kWarps, int64_t(std::max(sm_count, 1)) * kCtasPerSm);
  const unsigned grid = static_cast<unsigned>(blocks);
  const size_t a_size = dtype_bytes(p.in_dtype);
  for (int64_t m0 = 0; m0 < p.m;) {
    const int64_t rest = p.m - m0;
    int mr = mr_cap;
    while (mr > 1 && mr / 2 >= rest) mr /= 2;  // the smallest power of two holding the rest
    QuantParams qp;
    qp.b = static_cast<const uint8_t*>(p.b);
    qp.a = static_cast<const char*>(p.a) + m0 * p.a_sm * int64_t(a_size);
    qp.c = static_cast<float*>(p.c) + m0 * p.c_sm;
    qp.bias = p.has_bias ? p.bias : nullptr;
    qp.n = p.n;
    qp.k = p.k;
    qp.a_sm = p.a_sm;
    qp.c_sm = p.c_sm;
    qp.c_sn = p.c_sn;
    qp.bias_s = p.bias_s;
    qp.rows = static_cast<int32_t>(std::min<int64_t>(rest, mr));
    qp.a_dtype = p.in_dtype;
    qp.alpha = static_cast<float>(p.alpha);
    qp.beta = static_cast<float>(p.beta);
    qp.act = p.act;
    qp.gelu_tanh = p.gelu_tanh;
    cudaError_t e = cudaSuccess;
    switch (mr) {
      case 8:
        e = launch<Q, 8>(qp, grid, stream);
        break;
      case 4:
        e = launch<Q, 4>(qp, grid, stream);
        break;
      case 2:
        e = launch<Q, 2>(qp, grid, stream);
        break;
      default:
        e = launch<Q, 1>(qp, grid, stream);
        break;
    }
    if (e != cudaSuccess) return e;
    m0 += qp.rows;
  }
  return cudaSuccess;
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

bool gemv_quant_dtype(int32_t dtype) {
  return dtype == GK_DTYPE_Q8_0 || dtype == GK_DTYPE_Q4_0 || dtype == GK_DTYPE_Q4_1 ||
         dtype == GK_DTYPE_Q4_K;
}

bool gemv_quant_can_implement(const MatmulProblem& p, std::string* why) {
  if (!gemv_quant_dtype(p.b_dtype)) {
    *why = "gemv_quant reads q8_0, q4_0, q4_1 and q4_k weights";
    return false;
  }
  if (p.in_dtype != GK_DTYPE_F32 && p.in_dtype != GK_DTYPE_F16 && p.in_dtype != GK_DTYPE_BF16) {
    *why = "gemv_quant takes a in f32, f16 or bf16";
    return false;
  }
  if (p.out_dtype != GK_DTYPE_F32) {
    *why = "gemv_quant writes out in f32";
    return false;
  }
  if (p.batch.ndim != 0) {
    *why = "gemv_quant takes no batch dims";
    return false;
  }
  if (p.b_sk != 1 || p.b_sn != p.k) {
    *why = "gemv_quant needs b as contiguous packed rows [N, K] (transpose_b = 1)";
    return false;
  }
  if (p.a_sk != 1) {
    *why = "gemv_quant needs a contiguous along K";
    return false;
  }
  const int block = p.b_dtype == GK_DTYPE_Q4_K ? 256 : 32;
  if (p.k <= 0 || p.k % block != 0) {
    *why = "gemv_quant needs K > 0 and a multiple of the block (" + std::to_string(block) + ")";
    return false;
  }
  if (!aligned16(p.b)) {
    *why = "gemv_quant needs b's data 16-byte aligned";
    return false;
  }
  if (max_rows_of(p.b_dtype, p.k) < 1) {
    *why = "K = " + std::to_string(p.k) + " is too large for gemv_quant's row of a in " +
           std::to_string(kSmemBudget / 1024) + " KB of shared memory";
    return false;
  }
  return true;
}

cudaError_t gemv_quant_run(const MatmulProblem& p, int sm_count, cudaStream_t stream) {
  if (p.n == 0 || p.m == 0) return cudaSuccess;
  switch (p.b_dtype) {
    case GK_DTYPE_Q8_0:
      return run_typed<GK_DTYPE_Q8_0>(p, sm_count, stream);
    case GK_DTYPE_Q4_0:
      return run_typed<GK_DTYPE_Q4_0>(p, sm_count, stream);
    case GK_DTYPE_Q4_1:
      return run_typed<GK_DTYPE_Q4_1>(p, sm_count, stream);
    case GK_DTYPE_Q4_K:
      return run_typed<GK_DTYPE_Q4_K>(p, sm_count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace gk::matmul
