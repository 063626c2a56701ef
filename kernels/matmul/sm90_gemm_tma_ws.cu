// sm90_gemm_tma_ws.cu — see sm90_gemm_tma_ws.cuh for the tiling.
#include "sm90_gemm_tma_ws.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "matmul_epilogue.cuh"
#include "sm90_tuning.h"

namespace gk::matmul {
namespace {

using Cfg = Sm90Tuning;
constexpr int kBM = Cfg::kBlockM, kBN = Cfg::kBlockN, kBK = Cfg::kBlockK;
constexpr int kStages = Cfg::kStages;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kChunk = 64;                  // MN extent of one swizzled box
constexpr int kATileBytes = kBM * kBK * 2;  // 16 KB
constexpr int kBTileBytes = kBN * kBK * 2;  // 32 KB
constexpr int kStageBytes = kATileBytes + kBTileBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 2 * kStages * 8 + 1024;  // + align slack
static_assert(kBM == 64 * kConsumers, "one consumer warpgroup per 64 rows");

struct Sm90Params {
  void* c;
  int64_t m, n;
  int64_t c_sm, c_sn, c_bs;
  int32_t k_tiles, m_tiles, n_tiles, batch_count;
  int32_t a_batched, b_batched;
  int32_t out_f32, out_pairs;  // pairs: two adjacent columns per store
  EpilogueParams ep;
};

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GK_SM90A 1
#endif

#ifdef GK_SM90A
#include "sm90_wgmma_m64n256k16.inc"
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int32_t c0,
                                            int32_t c1, int32_t c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle. K-major: lbo unused (16), sbo =
// 1024 (8 rows of 128 B). MN-major: lbo = stride between 64-wide MN chunks, sbo = 1024.
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint64_t addr = smem_u32(p);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void acc_fence(float (&acc)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

__device__ __forceinline__ void tile_coords(const Sm90Params& p, int32_t tile, int32_t* b,
                                            int32_t* mt, int32_t* nt) {
  const int32_t per_batch = p.m_tiles * p.n_tiles;
  *b = tile / per_batch;
  const int32_t r = tile % per_batch;
  const int32_t group_span = Cfg::kGroupM * p.n_tiles;
  const int32_t first_m = (r / group_span) * Cfg::kGroupM;
  const int32_t group_rows = min(p.m_tiles - first_m, Cfg::kGroupM);
  *mt = first_m + (r % group_span) % group_rows;
  *nt = (r % group_span) / group_rows;
}

// Thread t of a consumer warpgroup holds, for j in 0..31 and h in 0..1, the columns
// 8j + 2(t%4) + {0, 1} of row 16(t/32) + (t%32)/4 + 8h: acc[4j + 2h + {0, 1}].
//
// Two paths, so that the code a tile runs stays small. A fully unrolled general epilogue
// (beta, bias, three activations, edge and stride checks per element) was ~1 MB of SASS
// per kernel, and every tile paid instruction-cache misses walking through it.
template <typename T, typename OutT>
__device__ __forceinline__ void epilogue_tile(const Sm90Params& p, float (&acc)[128], int32_t b,
                                              int64_t m0, int64_t n0) {
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  OutT* c = static_cast<OutT*>(p.c) + int64_t(b) * p.c_bs;
  const EpilogueParams& ep = p.ep;
  const int64_t row0 = m0 + warp * 16 + lane / 4;
  const int64_t col0 = n0 + (lane % 4) * 2;
  const bool plain = p.out_pairs && ep.beta == 0.0f && !ep.bias && ep.act == Activation::kNone &&
                     m0 + 64 <= p.m && n0 + kBN <= p.n;
  if (plain) {  // the common case: alpha only, whole tile in bounds, row-contiguous out
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      OutT* dst = c + (row0 + h * 8) * p.c_sm + col0;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const float v0 = ep.alpha * acc[4 * j + 2 * h], v1 = ep.alpha * acc[4 * j + 2 * h + 1];
        if constexpr (std::is_same_v<OutT, float>) {
          *reinterpret_cast<float2*>(dst + j * 8) = make_float2(v0, v1);
        } else {
          OutT pr[2] = {from_float<OutT>(v0), from_float<OutT>(v1)};
          *reinterpret_cast<uint32_t*>(dst + j * 8) = *reinterpret_cast<uint32_t*>(pr);
        }
      }
    }
    return;
  }
  // Everything else, one element per iteration of a loop that is not unrolled. The copy
  // keeps acc itself in registers (indexing it at run time would move it to local memory
  // for the whole kernel).
  float staged[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) staged[i] = acc[i];
#pragma unroll 1
  for (int i = 0; i < 128; ++i) {
    const int64_t row = row0 + ((i / 2) % 2) * 8;
    const int64_t col = col0 + (i / 4) * 8 + i % 2;
    if (row < p.m && col < p.n)
      store_epilogue<T, OutT>(ep, c + row * p.c_sm, col * p.c_sn, col, staged[i]);
  }
}

template <typename T, bool kAKMajor, bool kBKMajor>
__global__ void __launch_bounds__(kThreads, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_b, const Sm90Params p) {
#ifdef GK_SM90A
  extern __shared__ unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes; tiles must start on that boundary.
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* sa = smem;
  unsigned char* sb = smem + kStages * kATileBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;

  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();

  const int32_t total = p.batch_count * p.m_tiles * p.n_tiles;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int32_t tile = blockIdx.x; tile < total; tile += gridDim.x) {
        int32_t b, mt, nt;
        tile_coords(p, tile, &b, &mt, &nt);
        const int32_t ab = p.a_batched ? b : 0, bb = p.b_batched ? b : 0;
        for (int32_t kt = 0; kt < p.k_tiles; ++kt) {
          mbar_wait(&empty[stage], phase ^ 1);
          mbar_expect_tx(&full[stage], kStageBytes);
          unsigned char* a_dst = sa + stage * kATileBytes;
          unsigned char* b_dst = sb + stage * kBTileBytes;
          const int32_t k0 = kt * kBK;
          if constexpr (kAKMajor) {
            tma_load_3d(a_dst, &map_a, k0, mt * kBM, ab, &full[stage]);
          } else {
#pragma unroll
            for (int ch = 0; ch < kBM / kChunk; ++ch)
              tma_load_3d(a_dst + ch * kChunk * kBK * 2, &map_a, mt * kBM + ch * kChunk, k0, ab,
                          &full[stage]);
          }
          if constexpr (kBKMajor) {
            tma_load_3d(b_dst, &map_b, k0, nt * kBN, bb, &full[stage]);
          } else {
#pragma unroll
            for (int ch = 0; ch < kBN / kChunk; ++ch)
              tma_load_3d(b_dst + ch * kChunk * kBK * 2, &map_b, nt * kBN + ch * kChunk, k0, bb,
                          &full[stage]);
          }
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1;  // rows cw*64 .. cw*64+63 of the tile
    constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
    // Byte offsets of this warpgroup's A rows and of each k16 step inside a stage.
    constexpr uint32_t kAStepBytes = kAKMajor ? 32 : 16 * 128;
    constexpr uint32_t kBStepBytes = kBKMajor ? 32 : 16 * 128;
    constexpr uint32_t kALbo = kAKMajor ? 16 : kChunk * kBK * 2;
    constexpr uint32_t kBLbo = kBKMajor ? 16 : kChunk * kBK * 2;
    const uint32_t a_rows_off = cw * 64 * kBK * 2;  // K-major: 64 rows × 128 B; MN: chunk cw
    float acc[128];
    int stage = 0, prev_stage = 0;
    uint32_t phase = 0;
    for (int32_t tile = blockIdx.x; tile < total; tile += gridDim.x) {
      int32_t b, mt, nt;
      tile_coords(p, tile, &b, &mt, &nt);
      for (int32_t kt = 0; kt < p.k_tiles; ++kt) {
        mbar_wait(&full[stage], phase);
        const unsigned char* a_tile = sa + stage * kATileBytes + a_rows_off;
        const unsigned char* b_tile = sb + stage * kBTileBytes;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          const uint64_t da = smem_desc(a_tile + kk * kAStepBytes, kALbo, 1024);
          const uint64_t db = smem_desc(b_tile + kk * kBStepBytes, kBLbo, 1024);
          wgmma_m64n256k16<kBf16, kAKMajor ? 0 : 1, kBKMajor ? 0 : 1>(acc, da, db, (kt | kk) != 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // Leave this k-tile's wgmmas running; once at most one group is pending, the
        // previous k-tile's stage has been read and goes back to the producer.
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[prev_stage]);
        prev_stage = stage;
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      acc_fence(acc);
      if (threadIdx.x % 128 == 0) mbar_arrive(&empty[prev_stage]);
      const int64_t m0 = int64_t(mt) * kBM + cw * 64, n0 = int64_t(nt) * kBN;
      if (p.out_f32)
        epilogue_tile<T, float>(p, acc, b, m0, n0);
      else
        epilogue_tile<T, T>(p, acc, b, m0, n0);
    }
  }
#endif
}

CUtensorMapDataType tma_dtype(int32_t dtype) {
  return dtype == GK_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

// One operand as a 3-D tensor map {contiguous dim, other dim, batch}. box_outer is the
// tile's extent along the non-contiguous dim.
CUresult encode_operand(TensorMapEncodeFn encode, CUtensorMap* map, int32_t dtype, const void* base,
                        int64_t inner, int64_t outer, int64_t outer_stride, int64_t batch,
                        int64_t batch_stride, uint32_t box_inner, uint32_t box_outer) {
  // A fake, aligned address lets supports() ask the driver before any data exists.
  void* addr = base ? const_cast<void*>(base) : reinterpret_cast<void*>(uintptr_t(1) << 20);
  // A single row's stride is never used, but the driver still wants it 16-byte aligned.
  if (outer == 1) outer_stride = (inner + 7) / 8 * 8;
  const cuuint64_t dims[3] = {cuuint64_t(inner), cuuint64_t(outer), cuuint64_t(batch)};
  const cuuint64_t bstride =
      batch > 1 ? cuuint64_t(batch_stride) * 2 : cuuint64_t(outer_stride) * 2 * cuuint64_t(outer);
  const cuuint64_t strides[2] = {cuuint64_t(outer_stride) * 2, bstride};
  const cuuint32_t box[3] = {box_inner, box_outer, 1};
  const cuuint32_t estr[3] = {1, 1, 1};
  return encode(map, tma_dtype(dtype), 3, addr, dims, strides, box, estr,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

struct Layout {
  bool k_major;
  bool batched;
};

// Checks one operand's strides for TMA; fills *lay. rows = M or N.
bool check_operand(const char* name, const void* base, int64_t rows, int64_t k, int64_t s_row,
                   int64_t s_k, int32_t batch_ndim, int64_t batch_stride, Layout* lay,
                   std::string* why) {
  const bool k_major = s_k == 1 || (k == 1 && s_row != 1);
  const int64_t lead = k_major ? s_row : s_k;
  const int64_t inner = k_major ? k : rows;
  if (!k_major && s_row != 1) {
    *why = std::string(name) + " has no unit-stride dim; TMA needs one";
    return false;
  }
  const int64_t outer = k_major ? rows : k;
  if (outer > 1 && (lead <= 0 || (lead * 2) % 16 != 0 || lead < inner)) {
    *why = std::string(name) + "'s row stride " + std::to_string(lead) +
           " is not a positive multiple of 8 elements covering its rows (TMA needs 16-byte "
           "aligned rows)";
    return false;
  }
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) {
    *why = std::string(name) + " is not 16-byte aligned";
    return false;
  }
  lay->k_major = k_major;
  lay->batched = batch_ndim == 1 && batch_stride != 0;
  if (lay->batched && (batch_stride < 0 || (batch_stride * 2) % 16 != 0)) {
    *why = std::string(name) + "'s batch stride is not a positive multiple of 8 elements";
    return false;
  }
  return true;
}

bool build_maps(const MatmulProblem& p, TensorMapEncodeFn encode, CUtensorMap* ma, CUtensorMap* mb,
                Layout* la, Layout* lb, std::string* why) {
  if (!check_operand("a", p.a, p.m, p.k, p.a_sm, p.a_sk, p.batch.ndim, p.batch.a_stride[0], la,
                     why) ||
      !check_operand("b", p.b, p.n, p.k, p.b_sn, p.b_sk, p.batch.ndim, p.batch.b_stride[0], lb,
                     why))
    return false;
  if (!encode) return true;
  const int64_t nb = p.batch.ndim == 1 ? p.batch.shape[0] : 1;
  CUresult r;
  if (la->k_major)
    r = encode_operand(encode, ma, p.in_dtype, p.a, p.k, p.m, p.a_sm, la->batched ? nb : 1,
                       p.batch.a_stride[0], kBK, kBM);
  else
    r = encode_operand(encode, ma, p.in_dtype, p.a, p.m, p.k, p.a_sk, la->batched ? nb : 1,
                       p.batch.a_stride[0], kChunk, kBK);
  if (r != CUDA_SUCCESS) {
    *why = "cuTensorMapEncodeTiled refused a's layout (CUresult " + std::to_string(int(r)) + ")";
    return false;
  }
  if (lb->k_major)
    r = encode_operand(encode, mb, p.in_dtype, p.b, p.k, p.n, p.b_sn, lb->batched ? nb : 1,
                       p.batch.b_stride[0], kBK, kBN);
  else
    r = encode_operand(encode, mb, p.in_dtype, p.b, p.n, p.k, p.b_sk, lb->batched ? nb : 1,
                       p.batch.b_stride[0], kChunk, kBK);
  if (r != CUDA_SUCCESS) {
    *why = "cuTensorMapEncodeTiled refused b's layout (CUresult " + std::to_string(int(r)) + ")";
    return false;
  }
  return true;
}

template <typename T, bool kAK, bool kBK>
cudaError_t launch(const CUtensorMap& ma, const CUtensorMap& mb, const Sm90Params& prm, int grid,
                   cudaStream_t stream) {
  auto kernel = sm90_gemm_kernel<T, kAK, kBK>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(ma, mb, prm);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch_layout(const CUtensorMap& ma, const CUtensorMap& mb, const Sm90Params& prm,
                            bool ak, bool bk, int grid, cudaStream_t stream) {
  if (ak)
    return bk ? launch<T, true, true>(ma, mb, prm, grid, stream)
              : launch<T, true, false>(ma, mb, prm, grid, stream);
  return bk ? launch<T, false, true>(ma, mb, prm, grid, stream)
            : launch<T, false, false>(ma, mb, prm, grid, stream);
}

}  // namespace

bool sm90_gemm_can_implement(const MatmulProblem& p, TensorMapEncodeFn encode, std::string* why) {
  if (p.in_dtype != GK_DTYPE_BF16 && p.in_dtype != GK_DTYPE_F16) {
    *why = "matmul_sm90 serves bf16 and f16 inputs (f32 falls through to cublaslt/sm80)";
    return false;
  }
  if (p.out_dtype != p.in_dtype && p.out_dtype != GK_DTYPE_F32) {
    *why = "out dtype must be the input dtype or f32";
    return false;
  }
  if (p.k == 0) {
    *why = "K = 0 leaves the wgmma accumulators unset; served by the sm80/cpu path";
    return false;
  }
  if (p.batch.ndim > 1) {
    *why = "batch dims do not collapse to one stride per operand (TMA maps one batch dim)";
    return false;
  }
  const int64_t tiles = p.batch_count * ((p.m + kBM - 1) / kBM) * ((p.n + kBN - 1) / kBN);
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || tiles > INT32_MAX) {
    *why = "dims over 2^31 do not fit TMA coordinates";
    return false;
  }
  if (p.has_bias && p.bias && reinterpret_cast<uintptr_t>(p.bias) % 2 != 0) {
    *why = "bias is not element-aligned";
    return false;
  }
  CUtensorMap ma, mb;
  Layout la, lb;
  return build_maps(p, encode, &ma, &mb, &la, &lb, why);
}

cudaError_t sm90_gemm_run(const MatmulProblem& p, TensorMapEncodeFn encode, int sm_count,
                          cudaStream_t stream, std::string* why) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return cudaSuccess;
  CUtensorMap ma, mb;
  Layout la, lb;
  if (!build_maps(p, encode, &ma, &mb, &la, &lb, why)) return cudaErrorInvalidValue;
  Sm90Params prm;
  prm.c = p.c;
  prm.m = p.m;
  prm.n = p.n;
  prm.c_sm = p.c_sm;
  prm.c_sn = p.c_sn;
  prm.c_bs = p.batch.ndim == 1 ? p.batch.c_stride[0] : 0;
  prm.k_tiles = int32_t((p.k + kBK - 1) / kBK);
  prm.m_tiles = int32_t((p.m + kBM - 1) / kBM);
  prm.n_tiles = int32_t((p.n + kBN - 1) / kBN);
  prm.batch_count = int32_t(p.batch_count);
  prm.a_batched = la.batched;
  prm.b_batched = lb.batched;
  prm.out_f32 = p.out_dtype == GK_DTYPE_F32;
  const size_t out_bytes = dtype_bytes(p.out_dtype);
  prm.out_pairs = p.c_sn == 1 && p.c_sm % 2 == 0 && prm.c_bs % 2 == 0 &&
                  reinterpret_cast<uintptr_t>(p.c) % (2 * out_bytes) == 0;
  prm.ep = make_epilogue_params(p);
  const int64_t tiles = int64_t(prm.batch_count) * prm.m_tiles * prm.n_tiles;
  const int grid = int(tiles < sm_count ? tiles : sm_count);
  if (p.in_dtype == GK_DTYPE_BF16)
    return dispatch_layout<__nv_bfloat16>(ma, mb, prm, la.k_major, lb.k_major, grid, stream);
  return dispatch_layout<__half>(ma, mb, prm, la.k_major, lb.k_major, grid, stream);
}

}  // namespace gk::matmul
