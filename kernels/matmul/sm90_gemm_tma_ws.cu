// Whole on purpose (over 600 lines): one kernel (STYLE.md: one op per .cu/.cuh pair) and the
// host code that launches it.
// sm90_gemm_tma_ws.cu — see sm90_gemm_tma_ws.cuh for the tiling.
#include "sm90_gemm_tma_ws.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>

#include "matmul_epilogue.cuh"
#include "sm90_tuning.h"

namespace gk::matmul {
namespace {

using Cfg = Sm90Tuning;
constexpr int kBM = Cfg::kBlockM, kBN = Cfg::kBlockN;
constexpr int kRowBytes = Cfg::kBlockKBytes;  // one M/N row of a k-tile: a 128-byte swizzle row
// The k-tile in elements of T: 64 for bf16/f16; 32 for f32, which the kernel reads as tf32.
template <typename T>
constexpr int kBlockK = kRowBytes / int(sizeof(T));
// k per wgmma: k16 for 16-bit inputs, k8 for tf32; either way a 32-byte step in the row.
template <typename T>
constexpr int kStepK = std::is_same_v<T, float> ? 8 : 16;
constexpr int kStages = Cfg::kStages;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kChunk = 64;  // MN extent of one swizzled box (M/N-major operands: 16-bit only)
constexpr int kATileBytes = kBM * kRowBytes;  // 16 KB
constexpr int kBTileBytes = kBN * kRowBytes;  // 32 KB
constexpr int kStageBytes = kATileBytes + kBTileBytes;
// Epilogue staging, per consumer warpgroup: 64 rows of 128 bytes of out, each row padded
// (epilogue_staged) so that the accumulator fragments' writes hit distinct banks.
constexpr int kEpiRowBytes = 128;
constexpr int kEpiBytes = 64 * (kEpiRowBytes + 32);
constexpr int kBarrierBytes = 2 * kStages * 8;
constexpr int kSmemBytes =
    kStages * kStageBytes + kBarrierBytes + kConsumers * kEpiBytes + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB a CTA may have on sm_90");
static_assert(kBM == 64 * kConsumers, "one consumer warpgroup per 64 rows");

struct Sm90Params {
  void* c;
  int64_t m, n;
  int64_t c_sm, c_sn, c_bs;
  int32_t k_tiles, m_tiles, n_tiles, batch_count;
  int32_t m_units;  // ⌈m_tiles / cluster size⌉: a cluster's CTAs take adjacent M-tiles
  int32_t a_batched, b_batched;
  int32_t out_f32, out_pairs;  // pairs: two adjacent columns per store
  int32_t out_vec16;           // rows of out (and its batch stride) 16-byte aligned
  EpilogueParams ep;
};

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GK_SM90A 1
#endif

#ifdef GK_SM90A
#include "sm90_wgmma_m64n256k16.inc"
#include "sm90_wgmma_m64n256k8_tf32.inc"
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

// Arrives on the barrier at the same offset in the shared memory of cluster CTA `rank`.
// CTA-scope release is enough: what it orders is this warpgroup's own wgmma reads of its
// own shared memory, finished (wgmma.wait_group) before the arrival. A cluster-scope
// release would add a GPU-wide memory barrier per k-tile.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(rank)
      : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of every CTA in the cluster; release/acquire orders the mbarrier inits
// before remote use, and the last TMA and remote arrivals before a CTA exits.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int32_t c0,
                                            int32_t c1, int32_t c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}

// The same box, written at this offset into the shared memory of every CTA in `mask`,
// each signalling its own barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const CUtensorMap* map, int32_t c0,
                                                      int32_t c1, int32_t c2, uint64_t* bar,
                                                      uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)), "h"(mask)
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

// Work unit u is kCluster vertically adjacent tiles, one per CTA of a cluster (they share
// the B tile). Units walk kGroupM M-tiles down before moving right, for L2 reuse.
template <int kCluster>
__device__ __forceinline__ void unit_coords(const Sm90Params& p, int32_t unit, uint32_t rank,
                                            int32_t* b, int32_t* mt, int32_t* nt) {
  constexpr int32_t kGroup = Cfg::kGroupM / kCluster;
  const int32_t per_batch = p.m_units * p.n_tiles;
  *b = unit / per_batch;
  const int32_t r = unit % per_batch;
  const int32_t group_span = kGroup * p.n_tiles;
  const int32_t first = (r / group_span) * kGroup;
  const int32_t group_rows = min(p.m_units - first, kGroup);
  *mt = (first + (r % group_span) % group_rows) * kCluster + int32_t(rank);
  *nt = (r % group_span) / group_rows;
}

// Thread t of a consumer warpgroup holds, for j in 0..31 and h in 0..1, the columns
// 8j + 2(t%4) + {0, 1} of row 16(t/32) + (t%32)/4 + 8h: acc[4j + 2h + {0, 1}].
//
// Two paths, so that the code a tile runs stays small. A fully unrolled general epilogue
// (beta, bias, three activations, edge and stride checks per element) was ~1 MB of SASS
// per kernel, and every tile paid instruction-cache misses walking through it.
__device__ __forceinline__ void warpgroup_sync(int cw) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cw) : "memory");  // id 0 is __syncthreads
}

// The whole 64×256 tile of one warpgroup, alpha only, out row-contiguous and 16-byte
// aligned: fragments go to shared memory one 128-byte column band at a time and leave as
// 16-byte stores, eight lanes per row, so each store instruction writes whole lines
// (the fragments alone would write 16-byte pieces of 8 rows per instruction).
template <typename OutT>
__device__ __forceinline__ void epilogue_staged(const Sm90Params& p, float (&acc)[128], OutT* c,
                                                int64_t m0, int64_t n0, unsigned char* buf,
                                                int cw) {
  constexpr int kCols = kEpiRowBytes / int(sizeof(OutT));  // per band: 64 bf16/f16, 32 f32
  // Row r starts 4r (2-byte out: 4 lanes × 4 B per row) or 8r (f32: 4 lanes × 8 B, a
  // half-warp at a time) banks further on, so 8 (4) rows of fragments never share a bank.
  constexpr int kStride = kEpiRowBytes + 8 * int(sizeof(OutT));
  static_assert(64 * kStride <= kEpiBytes, "staging rows do not fit");
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int frag_row = warp * 16 + lane / 4, frag_col = (lane % 4) * 2;
#pragma unroll
  for (int band = 0; band < kBN / kCols; ++band) {
#pragma unroll
    for (int jj = 0; jj < kCols / 8; ++jj) {
      const int j = band * (kCols / 8) + jj;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float v0 = p.ep.alpha * acc[4 * j + 2 * h];
        const float v1 = p.ep.alpha * acc[4 * j + 2 * h + 1];
        unsigned char* dst =
            buf + (frag_row + 8 * h) * kStride + (jj * 8 + frag_col) * int(sizeof(OutT));
        if constexpr (std::is_same_v<OutT, float>) {
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        } else {
          OutT pr[2] = {from_float<OutT>(v0), from_float<OutT>(v1)};
          *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<uint32_t*>(pr);
        }
      }
    }
    warpgroup_sync(cw);
    constexpr int kChunksPerRow = kEpiRowBytes / 16;
#pragma unroll
    for (int i = 0; i < 64 * kChunksPerRow / 128; ++i) {
      const int chunk = tid + i * 128, row = chunk / kChunksPerRow, part = chunk % kChunksPerRow;
      const uint4 v = *reinterpret_cast<const uint4*>(buf + row * kStride + part * 16);
      OutT* g = c + (m0 + row) * p.c_sm + n0 + band * kCols + part * (16 / int(sizeof(OutT)));
      *reinterpret_cast<uint4*>(g) = v;
    }
    warpgroup_sync(cw);  // the band is read before the next one overwrites it
  }
}

template <typename T, typename OutT>
__device__ __forceinline__ void epilogue_tile(const Sm90Params& p, float (&acc)[128], int32_t b,
                                              int64_t m0, int64_t n0, unsigned char* staging,
                                              int cw) {
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  OutT* c = static_cast<OutT*>(p.c) + int64_t(b) * p.c_bs;
  const EpilogueParams& ep = p.ep;
  const int64_t row0 = m0 + warp * 16 + lane / 4;
  const int64_t col0 = n0 + (lane % 4) * 2;
  const bool plain = p.out_pairs && ep.beta == 0.0f && !ep.bias && ep.act == Activation::kNone &&
                     m0 + 64 <= p.m && n0 + kBN <= p.n;
  if (plain && p.out_vec16) {
    epilogue_staged<OutT>(p, acc, c, m0, n0, staging, cw);
    return;
  }
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

// T: __nv_bfloat16, __half, or float (read as tf32, both operands K-major).
template <typename T, bool kAKMajor, bool kBKMajor, int kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_b, const Sm90Params p) {
  constexpr bool kTf32 = std::is_same_v<T, float>;
  constexpr int kBK = kBlockK<T>;
  static_assert(!kTf32 || (kAKMajor && kBKMajor), "tf32 wgmma reads K-major operands only");
  static_assert(kBK / kStepK<T> == 4, "four wgmma steps per k-tile, 32 bytes apart");
#ifdef GK_SM90A
  extern __shared__ unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes; tiles must start on that boundary.
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* sa = smem;
  unsigned char* sb = smem + kStages * kATileBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  unsigned char* epi = smem + kStages * kStageBytes + kBarrierBytes;

  const int wg = threadIdx.x / 128;
  // A stage is refilled once the consumers of every CTA in the cluster are done with it:
  // this CTA's producer writes its half of B into all of them.
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumers * kCluster);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  if constexpr (kCluster > 1)
    cluster_sync();
  else
    __syncthreads();

  const uint32_t rank = kCluster > 1 ? cluster_rank() : 0;
  const int32_t first_unit = blockIdx.x / kCluster, unit_step = gridDim.x / kCluster;
  const int32_t units = p.batch_count * p.m_units * p.n_tiles;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int32_t unit = first_unit; unit < units; unit += unit_step) {
        int32_t b, mt, nt;
        unit_coords<kCluster>(p, unit, rank, &b, &mt, &nt);
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
          // B: this CTA's 1/kCluster of the tile, into every CTA of the cluster.
          constexpr int kBPart = kBN / kCluster;
          unsigned char* part_dst = b_dst + rank * kBPart * kRowBytes;
          const int32_t part_n = nt * kBN + int32_t(rank) * kBPart;
          if constexpr (kBKMajor) {
            if constexpr (kCluster > 1)
              tma_load_3d_multicast(part_dst, &map_b, k0, part_n, bb, &full[stage],
                                    (1u << kCluster) - 1);
            else
              tma_load_3d(part_dst, &map_b, k0, part_n, bb, &full[stage]);
          } else {
#pragma unroll
            for (int ch = 0; ch < kBPart / kChunk; ++ch) {
              if constexpr (kCluster > 1)
                tma_load_3d_multicast(part_dst + ch * kChunk * kBK * 2, &map_b,
                                      part_n + ch * kChunk, k0, bb, &full[stage],
                                      (1u << kCluster) - 1);
              else
                tma_load_3d(part_dst + ch * kChunk * kBK * 2, &map_b, part_n + ch * kChunk, k0, bb,
                            &full[stage]);
            }
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
    // Byte offsets of this warpgroup's A rows and of each wgmma k step (k16, or k8 for tf32)
    // inside a stage.
    constexpr uint32_t kAStepBytes = kAKMajor ? 32 : 16 * 128;
    constexpr uint32_t kBStepBytes = kBKMajor ? 32 : 16 * 128;
    constexpr uint32_t kALbo = kAKMajor ? 16 : kChunk * kBK * 2;
    constexpr uint32_t kBLbo = kBKMajor ? 16 : kChunk * kBK * 2;
    const uint32_t a_rows_off = cw * 64 * kRowBytes;  // K-major: 64 rows × 128 B; MN: chunk cw
    float acc[128];
    int stage = 0, prev_stage = 0;
    uint32_t phase = 0;
    // A stage goes back to the producers of every CTA in the cluster.
    auto release = [&](int s) {
      if (threadIdx.x % 128 != 0) return;
      if constexpr (kCluster > 1) {
#pragma unroll
        for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&empty[s], r);
      } else {
        mbar_arrive(&empty[s]);
      }
    };
    for (int32_t unit = first_unit; unit < units; unit += unit_step) {
      int32_t b, mt, nt;
      unit_coords<kCluster>(p, unit, rank, &b, &mt, &nt);
      for (int32_t kt = 0; kt < p.k_tiles; ++kt) {
        mbar_wait(&full[stage], phase);
        const unsigned char* a_tile = sa + stage * kATileBytes + a_rows_off;
        const unsigned char* b_tile = sb + stage * kBTileBytes;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < kBK / kStepK<T>; ++kk) {
          const uint64_t da = smem_desc(a_tile + kk * kAStepBytes, kALbo, 1024);
          const uint64_t db = smem_desc(b_tile + kk * kBStepBytes, kBLbo, 1024);
          if constexpr (kTf32)
            wgmma_m64n256k8_tf32(acc, da, db, (kt | kk) != 0);
          else
            wgmma_m64n256k16<kBf16, kAKMajor ? 0 : 1, kBKMajor ? 0 : 1>(acc, da, db,
                                                                        (kt | kk) != 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // Leave this k-tile's wgmmas running; once at most one group is pending, the
        // previous k-tile's stage has been read and goes back to the producer.
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kt > 0) release(prev_stage);
        prev_stage = stage;
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      acc_fence(acc);
      release(prev_stage);
      const int64_t m0 = int64_t(mt) * kBM + cw * 64, n0 = int64_t(nt) * kBN;
      if (m0 >= p.m) continue;  // the padding tile of a cluster when M-tiles are odd
      if (kTf32 || p.out_f32)  // tf32: out is f32
        epilogue_tile<T, float>(p, acc, b, m0, n0, epi + cw * kEpiBytes, cw);
      else
        epilogue_tile<T, T>(p, acc, b, m0, n0, epi + cw * kEpiBytes, cw);
    }
  }
  // The other CTA may still multicast into this one's shared memory or arrive on its
  // barriers until it is done; neither may outlive this CTA.
  if constexpr (kCluster > 1) cluster_sync();
#endif
}

// f32 is loaded as TFLOAT32: the TMA unit rounds each element to tf32 (to nearest) on its
// way into shared memory. With FLOAT32 the wgmma would see the bits truncated instead, a
// bias of about -2^-11 per operand (rel. error ~7e-4 against ~3e-4 on uniform data).
CUtensorMapDataType tma_dtype(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case GK_DTYPE_F32: return CU_TENSOR_MAP_DATA_TYPE_TFLOAT32;
    default: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  }
}

// The k-tile in elements for an input dtype (kBlockK<T> on the host).
int64_t block_k(int32_t dtype) { return kRowBytes / int64_t(dtype_bytes(dtype)); }

// One operand as a 3-D tensor map {contiguous dim, other dim, batch}. box_outer is the
// tile's extent along the non-contiguous dim.
CUresult encode_operand(TensorMapEncodeFn encode, CUtensorMap* map, int32_t dtype, const void* base,
                        int64_t inner, int64_t outer, int64_t outer_stride, int64_t batch,
                        int64_t batch_stride, uint32_t box_inner, uint32_t box_outer) {
  // A fake, aligned address lets supports() ask the driver before any data exists.
  void* addr = base ? const_cast<void*>(base) : reinterpret_cast<void*>(uintptr_t(1) << 20);
  const int64_t esize = int64_t(dtype_bytes(dtype)), per16 = 16 / esize;  // elements in 16 B
  // A single row's stride is never used, but the driver still wants it 16-byte aligned.
  if (outer == 1) outer_stride = (inner + per16 - 1) / per16 * per16;
  const cuuint64_t dims[3] = {cuuint64_t(inner), cuuint64_t(outer), cuuint64_t(batch)};
  const cuuint64_t bstride = batch > 1 ? cuuint64_t(batch_stride * esize)
                                       : cuuint64_t(outer_stride * esize) * cuuint64_t(outer);
  const cuuint64_t strides[2] = {cuuint64_t(outer_stride * esize), bstride};
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

// Checks one operand's strides for TMA; fills *lay. rows = M or N; esize = element bytes.
bool check_operand(const char* name, const void* base, int64_t esize, int64_t rows, int64_t k,
                   int64_t s_row, int64_t s_k, int32_t batch_ndim, int64_t batch_stride,
                   Layout* lay, std::string* why) {
  const std::string per16 = std::to_string(16 / esize);  // elements in 16 bytes
  const bool k_major = s_k == 1 || (k == 1 && s_row != 1);
  const int64_t lead = k_major ? s_row : s_k;
  const int64_t inner = k_major ? k : rows;
  if (!k_major && s_row != 1) {
    *why = std::string(name) + " has no unit-stride dim; TMA needs one";
    return false;
  }
  const int64_t outer = k_major ? rows : k;
  if (outer > 1 && (lead <= 0 || (lead * esize) % 16 != 0 || lead < inner)) {
    *why = std::string(name) + "'s row stride " + std::to_string(lead) +
           " is not a positive multiple of " + per16 +
           " elements covering its rows (TMA needs 16-byte aligned rows)";
    return false;
  }
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) {
    *why = std::string(name) + " is not 16-byte aligned";
    return false;
  }
  lay->k_major = k_major;
  lay->batched = batch_ndim == 1 && batch_stride != 0;
  if (lay->batched && (batch_stride < 0 || (batch_stride * esize) % 16 != 0)) {
    *why = std::string(name) + "'s batch stride is not a positive multiple of " + per16 +
           " elements";
    return false;
  }
  return true;
}

// CTAs per cluster: two CTAs on adjacent M-tiles share each B tile through TMA multicast,
// which cuts the L2 -> SM traffic per CTA by a third; with one M-tile there is no pair.
int cluster_size(const MatmulProblem& p) {
  return (p.m + kBM - 1) / kBM >= 2 ? Cfg::kClusterM : 1;
}

bool build_maps(const MatmulProblem& p, TensorMapEncodeFn encode, CUtensorMap* ma, CUtensorMap* mb,
                Layout* la, Layout* lb, std::string* why) {
  const int64_t esize = int64_t(dtype_bytes(p.in_dtype));
  if (!check_operand("a", p.a, esize, p.m, p.k, p.a_sm, p.a_sk, p.batch.ndim,
                     p.batch.a_stride[0], la, why) ||
      !check_operand("b", p.b, esize, p.n, p.k, p.b_sn, p.b_sk, p.batch.ndim,
                     p.batch.b_stride[0], lb, why))
    return false;
  // The tf32 wgmma has no transpose bit: a must be [M, K] row-major and b [N, K] row-major
  // (transpose_b, Linear-style weights); cublaslt serves the other layouts.
  if (p.in_dtype == GK_DTYPE_F32 && !la->k_major) {
    *why = "tf32 wgmma reads K-major operands only; a is M-contiguous (transpose_a)";
    return false;
  }
  if (p.in_dtype == GK_DTYPE_F32 && !lb->k_major) {
    *why = "tf32 wgmma reads K-major operands only; b is N-contiguous (pass b as [N, K] with "
           "transpose_b)";
    return false;
  }
  if (!encode) return true;
  const uint32_t k_tile = uint32_t(block_k(p.in_dtype));
  const int64_t nb = p.batch.ndim == 1 ? p.batch.shape[0] : 1;
  CUresult r;
  if (la->k_major)
    r = encode_operand(encode, ma, p.in_dtype, p.a, p.k, p.m, p.a_sm, la->batched ? nb : 1,
                       p.batch.a_stride[0], k_tile, kBM);
  else
    r = encode_operand(encode, ma, p.in_dtype, p.a, p.m, p.k, p.a_sk, la->batched ? nb : 1,
                       p.batch.a_stride[0], kChunk, k_tile);
  if (r != CUDA_SUCCESS) {
    *why = "cuTensorMapEncodeTiled refused a's layout (CUresult " + std::to_string(int(r)) + ")";
    return false;
  }
  if (lb->k_major)
    r = encode_operand(encode, mb, p.in_dtype, p.b, p.k, p.n, p.b_sn, lb->batched ? nb : 1,
                       p.batch.b_stride[0], k_tile, kBN / cluster_size(p));
  else
    r = encode_operand(encode, mb, p.in_dtype, p.b, p.n, p.k, p.b_sk, lb->batched ? nb : 1,
                       p.batch.b_stride[0], kChunk, k_tile);
  if (r != CUDA_SUCCESS) {
    *why = "cuTensorMapEncodeTiled refused b's layout (CUresult " + std::to_string(int(r)) + ")";
    return false;
  }
  return true;
}

// How many clusters of the kernel fit on the current device at once (a GPC's SM count
// need not be even, so it can be fewer than SMs / 2). Asked once per device.
template <typename Kernel>
int max_active_clusters(Kernel kernel, int cluster, int sm_count, const cudaLaunchConfig_t& cfg) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device >= kMaxDevices) device = -1;
  if (device >= 0 && known[device].load(std::memory_order_relaxed) > 0)
    return known[device].load(std::memory_order_relaxed);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters <= 0) {
    (void)cudaGetLastError();  // leave no error behind for the launch to report
    clusters = sm_count / cluster;
  }
  if (device >= 0) known[device].store(clusters, std::memory_order_relaxed);
  return clusters;
}

// Persistent CTAs: one per SM (one cluster per kCluster SMs), at most one per work unit.
template <typename T, bool kAK, bool kBK, int kCluster>
cudaError_t launch(const CUtensorMap& ma, const CUtensorMap& mb, const Sm90Params& prm,
                   int sm_count, cudaStream_t stream) {
  auto kernel = sm90_gemm_kernel<T, kAK, kBK, kCluster>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kCluster;
  attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kCluster);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const int64_t units = int64_t(prm.batch_count) * prm.m_units * prm.n_tiles;
  const int fit = kCluster > 1 ? max_active_clusters(kernel, kCluster, sm_count, cfg) : sm_count;
  cfg.gridDim = dim3(unsigned(std::min<int64_t>(units, fit) * kCluster));
  return cudaLaunchKernelEx(&cfg, kernel, ma, mb, prm);
}

template <typename T, int kCluster>
cudaError_t dispatch_layout(const CUtensorMap& ma, const CUtensorMap& mb, const Sm90Params& prm,
                            bool ak, bool bk, int sm_count, cudaStream_t stream) {
  if (ak)
    return bk ? launch<T, true, true, kCluster>(ma, mb, prm, sm_count, stream)
              : launch<T, true, false, kCluster>(ma, mb, prm, sm_count, stream);
  return bk ? launch<T, false, true, kCluster>(ma, mb, prm, sm_count, stream)
            : launch<T, false, false, kCluster>(ma, mb, prm, sm_count, stream);
}

}  // namespace

bool sm90_gemm_can_implement(const MatmulProblem& p, TensorMapEncodeFn encode, std::string* why) {
  if (p.in_dtype == GK_DTYPE_F32 && !p.allow_tf32) {
    *why = "matmul_sm90 serves f32 only as tf32 (precision=\"tf32\"); full f32 falls through "
           "to cublaslt/sm80";
    return false;
  }
  if (p.in_dtype != GK_DTYPE_BF16 && p.in_dtype != GK_DTYPE_F16 && p.in_dtype != GK_DTYPE_F32) {
    *why = "matmul_sm90 serves bf16, f16 and tf32 inputs (f64 falls through to cublaslt/sm80)";
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
  const uintptr_t bias_addr = reinterpret_cast<uintptr_t>(p.bias);
  if (p.has_bias && p.bias && bias_addr % dtype_bytes(p.in_dtype) != 0) {
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
  const int64_t k_tile = block_k(p.in_dtype);
  prm.k_tiles = int32_t((p.k + k_tile - 1) / k_tile);
  prm.m_tiles = int32_t((p.m + kBM - 1) / kBM);
  prm.n_tiles = int32_t((p.n + kBN - 1) / kBN);
  prm.batch_count = int32_t(p.batch_count);
  const int cluster = cluster_size(p);
  prm.m_units = (prm.m_tiles + cluster - 1) / cluster;
  prm.a_batched = la.batched;
  prm.b_batched = lb.batched;
  prm.out_f32 = p.out_dtype == GK_DTYPE_F32;
  const size_t out_bytes = dtype_bytes(p.out_dtype);
  prm.out_pairs = p.c_sn == 1 && p.c_sm % 2 == 0 && prm.c_bs % 2 == 0 &&
                  reinterpret_cast<uintptr_t>(p.c) % (2 * out_bytes) == 0;
  prm.out_vec16 = p.c_sn == 1 && (p.c_sm * out_bytes) % 16 == 0 &&
                  (prm.c_bs * out_bytes) % 16 == 0 && reinterpret_cast<uintptr_t>(p.c) % 16 == 0;
  prm.ep = make_epilogue_params(p);
  static_assert(Cfg::kClusterM == 2, "one clustered and one single-CTA instantiation");
  const bool ak = la.k_major, bk = lb.k_major;
  if (p.in_dtype == GK_DTYPE_F32)  // tf32: build_maps let through K-major a and b only
    return cluster == 2 ? launch<float, true, true, 2>(ma, mb, prm, sm_count, stream)
                        : launch<float, true, true, 1>(ma, mb, prm, sm_count, stream);
  if (p.in_dtype == GK_DTYPE_BF16)
    return cluster == 2 ? dispatch_layout<__nv_bfloat16, 2>(ma, mb, prm, ak, bk, sm_count, stream)
                        : dispatch_layout<__nv_bfloat16, 1>(ma, mb, prm, ak, bk, sm_count, stream);
  return cluster == 2 ? dispatch_layout<__half, 2>(ma, mb, prm, ak, bk, sm_count, stream)
                      : dispatch_layout<__half, 1>(ma, mb, prm, ak, bk, sm_count, stream);
}

}  // namespace gk::matmul
