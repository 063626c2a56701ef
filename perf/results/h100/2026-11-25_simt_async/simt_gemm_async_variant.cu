// simt_gemm.cu — see simt_gemm.cuh for the tiling.
#include "simt_gemm.cuh"

#include <cstdint>

#include "matmul_epilogue.cuh"
#include "sm80_tuning.h"

namespace gk::matmul {
namespace {

// ---------------------------------------------------------------- general kernel
constexpr int kTile = 64;  // BM = BN
constexpr int kTileK = 8;
constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    simt_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t m,
                     int64_t n, int64_t k, int64_t a_sm, int64_t a_sk, int64_t b_sk, int64_t b_sn,
                     int64_t c_sm, int64_t c_sn, BatchLayout batch, int64_t batch_count,
                     EpilogueParams ep) {
  __shared__ T as[kTileK][kTile + 1];
  __shared__ T bs[kTileK][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  for (int64_t bi = blockIdx.z; bi < batch_count; bi += gridDim.z) {
    int64_t oa, ob, oc;
    batch_offsets(batch, bi, &oa, &ob, &oc);
    T acc[4][4] = {};
    for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
      // 512 elements per tile, 2 per thread; walk the contiguous-ish dim fastest.
      for (int e = threadIdx.x; e < kTile * kTileK; e += kThreads) {
        const int r = e % kTile, kk = e / kTile;
        const int64_t gm = m0 + r, gk = k0 + kk, gn = n0 + r;
        as[kk][r] = (gm < m && gk < k) ? a[oa + gm * a_sm + gk * a_sk] : T(0);
        bs[kk][r] = (gn < n && gk < k) ? b[ob + gk * b_sk + gn * b_sn] : T(0);
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTileK; ++kk) {
        T av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) av[i] = as[kk][ty * 4 + i];
#pragma unroll
        for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx * 4 + j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t gm = m0 + ty * 4 + i;
      if (gm >= m) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t gn = n0 + tx * 4 + j;
        if (gn >= n) continue;
        const int64_t off = oc + gm * c_sm + gn * c_sn;
        T v = T(ep.alpha_f64) * acc[i][j];
        if (ep.beta_f64 != 0.0) v += T(ep.beta_f64) * c[off];
        if (ep.bias) v += static_cast<const T*>(ep.bias)[gn * ep.bias_s];
        c[off] = apply_activation(v, ep.act, ep.gelu_tanh);
      }
    }
  }
}

template <typename T>
cudaError_t launch(const MatmulProblem& p, cudaStream_t stream) {
  const dim3 grid(unsigned((p.n + kTile - 1) / kTile), unsigned((p.m + kTile - 1) / kTile),
                  unsigned(p.batch_count < 65535 ? p.batch_count : 65535));
  simt_gemm_kernel<T><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(p.a), static_cast<const T*>(p.b), static_cast<T*>(p.c), p.m, p.n, p.k,
      p.a_sm, p.a_sk, p.b_sk, p.b_sn, p.c_sm, p.c_sn, p.batch, p.batch_count,
      make_epilogue_params(p));
  return cudaGetLastError();
}

// ---------------------------------------------------------------- f32, 16-byte loads
using Vec = Sm80SimtTuning;
constexpr int kVBM = Vec::kBlockM, kVBN = Vec::kBlockN, kVBK = Vec::kBlockK;
constexpr int kVThreads = Vec::kThreads;
// smem row of a k-tile: 128 M (or N) values + 4. The pad keeps rows 16-byte aligned and
// puts k rows 0 and 4 half a bank cycle apart (132·4 ≡ 16 mod 32), so the transposing
// scalar stores of a K-contiguous operand (16 rows × k 0..3 and 4..7 per warp) hit 32
// distinct banks.
constexpr int kVLd = kVBM + 4;
static_assert(kVBM == 128 && kVBN == 128 && kVBK == 8 && kVThreads == 256,
              "the thread mappings below assume 128×128×8 and 256 threads");

// One operand's share of a k-tile: 4 consecutive floats per thread, 256 × 4 = 128 × 8.
// kKContig: the operand is K-contiguous in global ([rows = M or N][K], a row-major a or a
// transposed b). Thread t reads row t/2, k 4·(t%2)..+3 (two threads per 32-byte row
// segment) and stores them transposed into smem column t/2 of k rows 4·(t%2)..+3.
// Otherwise it is M/N-contiguous ([K][M or N]): thread t reads k row t/32, columns
// 4·(t%32)..+3 (a warp reads 512 contiguous bytes) and stores one float4.
// `row_stride`: elements between the operand's rows in global (between M/N rows when
// K-contiguous, between k rows otherwise). The caller guarantees unit stride along the
// rows, a 16-byte aligned base and row_stride % 4 == 0, so every in-bounds 4-chunk is one
// aligned float4; chunks crossing the M/N or K edge are loaded per element, zero-filled.
template <bool kKContig>
struct Vec4Loader {
  const float* ptr;  // this thread's chunk of the next k-tile to load
  // K-contiguous: K - kq while this thread's row is inside M/N, else 0; element j of the
  // k-tile at k0 is in bounds when k0 + j < k_lim. M/N-contiguous: K - kq.
  int k_lim;
  int cols;  // M/N-contiguous only: how many of the chunk's 4 columns lie inside M/N

  // g: the operand's (batch entry's) base; mn0: the tile's first row (K-contiguous) or
  // column; row_stride as above. k ≤ INT32_MAX - kVBK (checked on the host).
  __device__ __forceinline__ void init(const float* g, int tid, int64_t mn0, int64_t mn_limit,
                                       int64_t row_stride, int k) {
    if (kKContig) {
      const int kq = (tid % 2) * 4;
      const int64_t row = mn0 + tid / 2;
      ptr = g + (row < mn_limit ? row * row_stride + kq : 0);
      k_lim = row < mn_limit ? k - kq : 0;
      cols = 0;
    } else {
      const int kq = tid / 32;
      const int64_t col = mn0 + (tid % 32) * 4;
      ptr = g + int64_t(kq) * row_stride + col;
      k_lim = k - kq;
      const int64_t left = mn_limit - col;
      cols = left < 0 ? 0 : left > 4 ? 4 : int(left);
    }
  }

  // Reads this thread's chunk of the k-tile starting at k0 (zero outside M/N and K) and
  // moves on by `step` elements (the next k-tile).
  __device__ __forceinline__ void load(int k0, int64_t step, float (&v)[4]) {
    if (kKContig) {
      if (k0 + 4 <= k_lim) {
        const float4 q = *reinterpret_cast<const float4*>(ptr);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = k0 + j < k_lim ? ptr[j] : 0.0f;
      }
    } else {
      if (k0 < k_lim && cols == 4) {
        const float4 q = *reinterpret_cast<const float4*>(ptr);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = (k0 < k_lim && j < cols) ? ptr[j] : 0.0f;
      }
    }
    ptr += step;
  }

  // s: one smem k-tile, [kVBK][kVLd].
  __device__ __forceinline__ static void store(float* s, int tid, const float (&v)[4]) {
    if (kKContig) {
      const int kq = (tid % 2) * 4, col = tid / 2;
#pragma unroll
      for (int j = 0; j < 4; ++j) s[(kq + j) * kVLd + col] = v[j];
    } else {
      *reinterpret_cast<float4*>(s + (tid / 32) * kVLd + (tid % 32) * 4) =
          make_float4(v[0], v[1], v[2], v[3]);
    }
  }
};

// Thread (ty, tx) of the 16×16 grid owns rows ty·4 + {0..3} and 64 + ty·4 + {0..3} of the
// tile, columns tx·4 + {0..3} and 64 + tx·4 + {0..3}. A warp is 4 (ty) × 8 (tx) threads,
// so each of its float4 smem reads touches 4 or 8 consecutive float4s: no bank conflict.
__device__ __forceinline__ int vec4_ty(int tid) {
  return (tid / 32 / 2) * 4 + (tid % 32) / 8;
}
__device__ __forceinline__ int vec4_tx(int tid) {
  return (tid / 32 % 2) * 8 + tid % 8;
}
// Tile row of accumulator row i (0..7) and tile column of accumulator column j (0..7).
__device__ __forceinline__ int vec4_row(int ty, int i) {
  return (i / 4) * 64 + ty * 4 + i % 4;
}
__device__ __forceinline__ int vec4_col(int tx, int j) {
  return (j / 4) * 64 + tx * 4 + j % 4;
}

// acc[i][j] += Σ_kk As[kk][row i] · Bs[kk][col j] over one k-tile.
__device__ __forceinline__ void vec4_mma_tile(const float* as, const float* bs, int ty, int tx,
                                              float (&acc)[8][8]) {
#pragma unroll
  for (int kk = 0; kk < kVBK; ++kk) {
    const float4 a0 = *reinterpret_cast<const float4*>(as + kk * kVLd + ty * 4);
    const float4 a1 = *reinterpret_cast<const float4*>(as + kk * kVLd + 64 + ty * 4);
    const float4 b0 = *reinterpret_cast<const float4*>(bs + kk * kVLd + tx * 4);
    const float4 b1 = *reinterpret_cast<const float4*>(bs + kk * kVLd + 64 + tx * 4);
    const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// Block → output tile: blocks walk kGroupM M-tiles down before moving right (the last
// group may be shorter), a bijection of [0, tiles_m·tiles_n).
__device__ __forceinline__ void vec4_tile_coords(int64_t lin, int64_t tiles_m, int64_t tiles_n,
                                                 int64_t* tm, int64_t* tn) {
  const int64_t per_group = int64_t(Vec::kGroupM) * tiles_n;
  const int64_t group = lin / per_group;
  const int64_t first_m = group * Vec::kGroupM;
  const int64_t rows = tiles_m - first_m < Vec::kGroupM ? tiles_m - first_m : int64_t(Vec::kGroupM);
  const int64_t in_group = lin - group * per_group;
  *tm = first_m + in_group % rows;
  *tn = in_group / rows;
}

struct Vec4Args {
  const float* a;
  const float* b;
  float* c;
  int64_t m, n, k;
  int64_t a_row_stride, b_row_stride;  // see Vec4Loader
  int64_t c_sm, c_sn;
  BatchLayout batch;
  int64_t batch_first;  // batch entry of blockIdx.z = 0
  EpilogueParams ep;
};

// kAK: a is K-contiguous (row-major [M, K]); else M-contiguous (transpose_a).
// kBK: b is K-contiguous (transpose_b, [N, K]); else N-contiguous (row-major [K, N]).
template <bool kAK, bool kBK>
__global__ void __launch_bounds__(kVThreads, Vec::kMinBlocksPerSm)
    simt_gemm_f32_vec4_kernel(const Vec4Args p) {
  __shared__ __align__(16) float sa[2][kVBK * kVLd];
  __shared__ __align__(16) float sb[2][kVBK * kVLd];
  const int tid = threadIdx.x;
  const int ty = vec4_ty(tid), tx = vec4_tx(tid);
  int64_t tm, tn;
  vec4_tile_coords(int64_t(blockIdx.y) * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, &tm, &tn);
  const int64_t m0 = tm * kVBM, n0 = tn * kVBN;
  const int k = int(p.k);
  const int k_tiles = (k + kVBK - 1) / kVBK;
  // Between k-tiles: 8 elements along a K-contiguous operand, 8 rows along the other.
  const int64_t a_step = kAK ? kVBK : kVBK * p.a_row_stride;
  const int64_t b_step = kBK ? kVBK : kVBK * p.b_row_stride;

  // One batch entry per blockIdx.z, no loop over entries: with one, the compiler hoisted
  // epilogue addressing out of it and the main loop spilled. The host launches batches of
  // more than 65535 entries in slices (p.batch_first).
  {
    const int64_t bi = p.batch_first + blockIdx.z;
    int64_t oa, ob, oc;
    batch_offsets(p.batch, bi, &oa, &ob, &oc);
    Vec4Loader<kAK> la;
    Vec4Loader<kBK> lb;
    la.init(p.a + oa, tid, m0, p.m, p.a_row_stride, k);
    lb.init(p.b + ob, tid, n0, p.n, p.b_row_stride, k);

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    // k-tile kt lives in buffer kt % 2. While the block computes on it, each thread holds
    // its share of k-tile kt+1 in registers and stores it into the other buffer after the
    // compute; that buffer was last read in iteration kt-1, which every thread finished
    // before the __syncthreads ending that iteration.
    float ra[4], rb[4];
    la.load(0, a_step, ra);
    lb.load(0, b_step, rb);
    Vec4Loader<kAK>::store(sa[0], tid, ra);
    Vec4Loader<kBK>::store(sb[0], tid, rb);
    __syncthreads();
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int cur = kt & 1;
      const bool more = kt + 1 < k_tiles;
      if (more) {
        la.load((kt + 1) * kVBK, a_step, ra);
        lb.load((kt + 1) * kVBK, b_step, rb);
      }
      vec4_mma_tile(sa[cur], sb[cur], ty, tx, acc);
      if (more) {
        Vec4Loader<kAK>::store(sa[cur ^ 1], tid, ra);
        Vec4Loader<kBK>::store(sb[cur ^ 1], tid, rb);
      }
      __syncthreads();
    }

    float* c = p.c + oc;
    const bool alpha_only =
        p.ep.beta == 0.0f && p.ep.bias == nullptr && p.ep.act == Activation::kNone;
    if (alpha_only && m0 + kVBM <= p.m && n0 + kVBN <= p.n && p.c_sn == 1 && p.c_sm % 4 == 0 &&
        reinterpret_cast<uintptr_t>(c) % 16 == 0) {
      // The usual case: whole tile in bounds, row-contiguous out, 16-byte stores.
      const float alpha = p.ep.alpha;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        float* row = c + (m0 + vec4_row(ty, i)) * p.c_sm + n0 + tx * 4;
        *reinterpret_cast<float4*>(row) =
            make_float4(alpha * acc[i][0], alpha * acc[i][1], alpha * acc[i][2], alpha * acc[i][3]);
        *reinterpret_cast<float4*>(row + 64) =
            make_float4(alpha * acc[i][4], alpha * acc[i][5], alpha * acc[i][6], alpha * acc[i][7]);
      }
    } else {
      // Everything else, one element per iteration of a loop that is not unrolled (an
      // unrolled general epilogue over 64 accumulators bloats the kernel's code). The copy
      // keeps acc itself in registers: indexing it at run time would move it to local
      // memory for the whole kernel.
      float staged[64];
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) staged[i * 8 + j] = acc[i][j];
#pragma unroll 1
      for (int e = 0; e < 64; ++e) {
        const int64_t row = m0 + vec4_row(ty, e / 8);
        const int64_t col = n0 + vec4_col(tx, e % 8);
        if (row < p.m && col < p.n)
          store_epilogue<float, float>(p.ep, c, row * p.c_sm + col * p.c_sn, col, staged[e]);
      }
    }
  }
}

// ---------------------------------------------------------------- f32, cp.async pipeline
// 128×256 tiles, 256 threads with 8×16 outputs each, one block per SM at up to 255
// registers, k-tiles of 8 landing by cp.async in a 4-stage ring: the shape cuBLAS's
// sm80_xmma ffma kernel takes on the H100 (256×128, 8 warps, 254 registers; ncu,
// perf/results/h100/2026-11-25_ncu/). Per k step a thread reads 8 + 16 values for 128 FFMA
// (the 128×128 kernel: 8 + 8 for 64), and no register staging or transposing stores sit
// between global and shared memory.
using Async = Sm80SimtAsyncTuning;
constexpr int kABM = Async::kBlockM, kABN = Async::kBlockN, kABK = Async::kBlockK;
constexpr int kAStages = Async::kStages;
constexpr int kAThreads = Async::kThreads;
static_assert(kABM == 128 && (kABN == 128 || kABN == 256) && kABK == 8 && kAThreads == 256,
              "the thread mappings below assume 128×(128 or 256)×8 and 256 threads");
// 8 warps as 2 (M) × 4 (N); a warp's lanes as 8 (M) × 4 (N); each thread 8 rows × kACols.
constexpr int kAWarpN = kABN / 4;
constexpr int kACols = kAWarpN / 4;
constexpr int kAMinBlocks = kABN == 128 ? 2 : 1;
// A K-contiguous operand is kept K-contiguous in smem, [rows][8 k + 4 pad]: rows 48 bytes
// apart put the 8 rows one quarter-warp reads at once (rows lm + 8i) in 8 distinct 16-byte
// bank groups. An M/N-contiguous one is kept as loaded, [8 k][rows].
constexpr int kKRow = kABK + 4;

template <bool kKContig, int kRows>
__host__ __device__ constexpr int async_tile_floats() {
  return kKContig ? kRows * kKRow : kABK * kRows;
}
template <bool kAK, bool kBK>
__host__ __device__ constexpr int async_stage_floats() {
  return async_tile_floats<kAK, kABM>() + async_tile_floats<kBK, kABN>();
}
template <bool kAK, bool kBK>
constexpr int async_smem_bytes() {
  return kAStages * async_stage_floats<kAK, kBK>() * int(sizeof(float));
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ float4 lds128(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}

// One operand's share of k-tiles: `kChunks` 16-byte chunks per thread per k-tile. Chunk c
// of a tile (c = tid + i·256) is 4 consecutive elements along the operand's contiguous
// dim. Chunks past M/N or K are zero-filled by cp.async's source size (a partial chunk
// at the contiguous dim's end reads only its in-bounds elements).
template <bool kKContig, int kRows>
struct AsyncLoader {
  static constexpr int kChunks = kRows * kABK / 4 / kAThreads;  // 1 (A) or 2 (B)
  const float* src[kChunks];  // chunk's address in the k-tile at k0 = 0
  int row_ok[kChunks];        // K-contiguous: row inside M/N; else elements inside M/N (0..4)
  int k_off[kChunks];         // the chunk's k (K-contiguous: first k) within a tile
  int dst[kChunks];           // float offset inside the smem tile

  // g: the operand's (batch entry's) base; mn0: the tile's first row; row_stride: elements
  // between rows along the non-contiguous dim (rows of M/N when K-contiguous, k rows else).
  __device__ __forceinline__ void init(const float* g, int tid, int64_t mn0, int64_t mn_limit,
                                       int64_t row_stride) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = tid + i * kAThreads;
      if (kKContig) {  // [rows][k]: 2 chunks per row
        const int row = c / 2, kq = (c % 2) * 4;
        const int64_t grow = mn0 + row;
        row_ok[i] = grow < mn_limit;
        src[i] = g + (row_ok[i] ? grow * row_stride + kq : 0);
        k_off[i] = kq;
        dst[i] = row * kKRow + kq;
      } else {  // [k][rows]: kRows / 4 chunks per k row
        const int kr = c / (kRows / 4), col = (c % (kRows / 4)) * 4;
        const int64_t left = mn_limit - (mn0 + col);
        row_ok[i] = left <= 0 ? 0 : left >= 4 ? 4 : int(left);
        src[i] = g + (row_ok[i] ? int64_t(kr) * row_stride + mn0 + col : 0);
        k_off[i] = kr;
        dst[i] = kr * kRows + col;
      }
    }
  }

  // Issues the copies of the k-tile starting at k0 into `tile`; `k_step` is the distance
  // between k-tiles in elements (8, or 8 rows).
  __device__ __forceinline__ void issue(float* tile, int k0, int k, int64_t k_step,
                                        int kt) const {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      int bytes;
      if (kKContig) {
        const int left = k - (k0 + k_off[i]);
        bytes = row_ok[i] ? (left <= 0 ? 0 : left >= 4 ? 16 : left * 4) : 0;
      } else {
        bytes = k0 + k_off[i] < k ? row_ok[i] * 4 : 0;
      }
      const float* from = bytes ? src[i] + int64_t(kt) * k_step : src[i];
      cp_async16(tile + dst[i], from, bytes);
    }
  }
};

// Rows of the thread's 8 accumulator rows inside the tile (i = 0..7): with a
// K-contiguous a, lm + 8i (rows read along k, one 16-byte read per row and 4 k); else
// 4·lm + 32·(i/4) + i%4 (rows read along m, 16-byte reads of 4 rows per k).
template <bool kAK>
__device__ __forceinline__ int async_row(int warp_m, int lm, int i) {
  return warp_m * 64 + (kAK ? lm + 8 * i : 4 * lm + 32 * (i / 4) + i % 4);
}
// Columns of the thread's kACols (j = 0..kACols-1): 4·ln + 16·(j/4) + j%4 in either
// layout.
__device__ __forceinline__ int async_col(int warp_n, int ln, int j) {
  return warp_n * kAWarpN + 4 * ln + 16 * (j / 4) + j % 4;
}

// acc[i][j] += Σ_k A[row i][k] · B[k][col j] over one k-tile in smem, 4 k at a time.
template <bool kAK, bool kBK>
__device__ __forceinline__ void async_mma_tile(const float* sa, const float* sb, int warp_m,
                                               int warp_n, int lm, int ln,
                                               float (&acc)[8][kACols]) {
#pragma unroll
  for (int g = 0; g < kABK; g += 4) {
    float a[4][8];  // a[kk][i]
    if (kAK) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 q = lds128(sa + async_row<true>(warp_m, lm, i) * kKRow + g);
        a[0][i] = q.x, a[1][i] = q.y, a[2][i] = q.z, a[3][i] = q.w;
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 q = lds128(sa + (g + kk) * kABM + async_row<false>(warp_m, lm, 4 * h));
          a[kk][4 * h] = q.x, a[kk][4 * h + 1] = q.y, a[kk][4 * h + 2] = q.z,
          a[kk][4 * h + 3] = q.w;
        }
      }
    }
    if (kBK) {  // 4 columns × 4 k per group of reads
#pragma unroll
      for (int jq = 0; jq < kACols / 4; ++jq) {
        float4 q[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          q[e] = lds128(sb + async_col(warp_n, ln, 4 * jq + e) * kKRow + g);
        const float b[4][4] = {{q[0].x, q[1].x, q[2].x, q[3].x},
                               {q[0].y, q[1].y, q[2].y, q[3].y},
                               {q[0].z, q[1].z, q[2].z, q[3].z},
                               {q[0].w, q[1].w, q[2].w, q[3].w}};
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][4 * jq + e] += a[kk][i] * b[kk][e];
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        float b[kACols];
#pragma unroll
        for (int jq = 0; jq < kACols / 4; ++jq) {
          const float4 q = lds128(sb + (g + kk) * kABN + async_col(warp_n, ln, 4 * jq));
          b[4 * jq] = q.x, b[4 * jq + 1] = q.y, b[4 * jq + 2] = q.z, b[4 * jq + 3] = q.w;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < kACols; ++j) acc[i][j] += a[kk][i] * b[j];
      }
    }
  }
}

// kAK: a is K-contiguous (row-major [M, K]); else M-contiguous (transpose_a).
// kBK: b is K-contiguous (transpose_b, [N, K]); else N-contiguous (row-major [K, N]).
template <bool kAK, bool kBK>
__global__ void __launch_bounds__(kAThreads, kAMinBlocks)
    simt_gemm_f32_async_kernel(const Vec4Args p) {
  extern __shared__ __align__(16) float smem[];
  constexpr int kStageFloats = async_stage_floats<kAK, kBK>();
  constexpr int kAFloats = async_tile_floats<kAK, kABM>();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_m = warp % 2, warp_n = warp / 2, lm = lane % 8, ln = lane / 8;
  int64_t tm, tn;
  vec4_tile_coords(int64_t(blockIdx.y) * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, &tm, &tn);
  const int64_t m0 = tm * kABM, n0 = tn * kABN;
  const int k = int(p.k);
  const int k_tiles = (k + kABK - 1) / kABK;
  const int64_t a_step = kAK ? kABK : kABK * p.a_row_stride;
  const int64_t b_step = kBK ? kABK : kABK * p.b_row_stride;

  const int64_t bi = p.batch_first + blockIdx.z;
  int64_t oa, ob, oc;
  batch_offsets(p.batch, bi, &oa, &ob, &oc);
  AsyncLoader<kAK, kABM> la;
  AsyncLoader<kBK, kABN> lb;
  la.init(p.a + oa, tid, m0, p.m, p.a_row_stride);
  lb.init(p.b + ob, tid, n0, p.n, p.b_row_stride);

  float acc[8][kACols];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < kACols; ++j) acc[i][j] = 0.0f;

  // Stage s holds k-tile kt when kt % kAStages == s. Prologue: the first kAStages - 1
  // tiles, one commit group each (empty groups past the end keep the count uniform).
#pragma unroll
  for (int s = 0; s < kAStages - 1; ++s) {
    if (s < k_tiles) {
      float* st = smem + s * kStageFloats;
      la.issue(st, s * kABK, k, a_step, s);
      lb.issue(st + kAFloats, s * kABK, k, b_step, s);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // This thread's copies of tile kt have landed; after the barrier everyone's have, and
    // everyone is done reading tile kt - 1, whose stage the next copies refill.
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kAStages - 2));
    __syncthreads();
    const int next = kt + kAStages - 1;
    if (next < k_tiles) {
      float* st = smem + (next % kAStages) * kStageFloats;
      la.issue(st, next * kABK, k, a_step, next);
      lb.issue(st + kAFloats, next * kABK, k, b_step, next);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    const float* st = smem + (kt % kAStages) * kStageFloats;
    async_mma_tile<kAK, kBK>(st, st + kAFloats, warp_m, warp_n, lm, ln, acc);
  }
  asm volatile("cp.async.wait_group 0;\n" ::);

  float* c = p.c + oc;
  const bool alpha_only =
      p.ep.beta == 0.0f && p.ep.bias == nullptr && p.ep.act == Activation::kNone;
  if (alpha_only && m0 + kABM <= p.m && n0 + kABN <= p.n && p.c_sn == 1 && p.c_sm % 4 == 0 &&
      reinterpret_cast<uintptr_t>(c) % 16 == 0) {
    // Whole tile in bounds, row-contiguous out: 16-byte stores of 4 adjacent columns.
    const float alpha = p.ep.alpha;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float* row = c + (m0 + async_row<kAK>(warp_m, lm, i)) * p.c_sm + n0;
#pragma unroll
      for (int jq = 0; jq < kACols / 4; ++jq) {
        *reinterpret_cast<float4*>(row + async_col(warp_n, ln, 4 * jq)) =
            make_float4(alpha * acc[i][4 * jq], alpha * acc[i][4 * jq + 1],
                        alpha * acc[i][4 * jq + 2], alpha * acc[i][4 * jq + 3]);
      }
    }
  } else {
    // One element per iteration of a rolled loop over a copy of acc (see the 128×128
    // kernel's epilogue).
    float staged[8 * kACols];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < kACols; ++j) staged[i * kACols + j] = acc[i][j];
#pragma unroll 1
    for (int e = 0; e < 8 * kACols; ++e) {
      const int64_t row = m0 + async_row<kAK>(warp_m, lm, e / kACols);
      const int64_t col = n0 + async_col(warp_n, ln, e % kACols);
      if (row < p.m && col < p.n)
        store_epilogue<float, float>(p.ep, c, row * p.c_sm + col * p.c_sn, col, staged[e]);
    }
  }
}

template <bool kAK, bool kBK>
cudaError_t launch_async(Vec4Args args, int64_t batch_count, cudaStream_t stream) {
  constexpr int kSmem = async_smem_bytes<kAK, kBK>();
  auto* kernel = simt_gemm_f32_async_kernel<kAK, kBK>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (err != cudaSuccess) return err;
  for (int64_t first = 0; first < batch_count; first += 65535) {
    const int64_t entries = batch_count - first < 65535 ? batch_count - first : 65535;
    const dim3 grid(unsigned((args.n + kABN - 1) / kABN), unsigned((args.m + kABM - 1) / kABM),
                    unsigned(entries));
    args.batch_first = first;
    kernel<<<grid, kAThreads, kSmem, stream>>>(args);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

template <bool kAK, bool kBK>
cudaError_t launch_vec4(Vec4Args args, int64_t batch_count, cudaStream_t stream) {
  for (int64_t first = 0; first < batch_count; first += 65535) {
    const int64_t entries = batch_count - first < 65535 ? batch_count - first : 65535;
    const dim3 grid(unsigned((args.n + kVBN - 1) / kVBN), unsigned((args.m + kVBM - 1) / kVBM),
                    unsigned(entries));
    args.batch_first = first;
    simt_gemm_f32_vec4_kernel<kAK, kBK><<<grid, kVThreads, 0, stream>>>(args);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// True when an operand can be read as aligned float4s along `contiguous_stride`: unit
// stride there, a 16-byte aligned base, and every row and batch entry starting a
// multiple of 4 elements further.
bool vec4_operand_ok(const void* base, int64_t contiguous_stride, int64_t row_stride,
                     const int64_t* batch_strides, int batch_ndim) {
  if (contiguous_stride != 1 || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  if (row_stride % 4 != 0) return false;
  for (int d = 0; d < batch_ndim; ++d)
    if (batch_strides[d] % 4 != 0) return false;
  return true;
}

// Layout of each operand when the f32 float4 kernel applies.
struct Vec4Plan {
  bool applies = false;
  bool a_kcontig = false, b_kcontig = false;
};

Vec4Plan plan_vec4(const MatmulProblem& p) {
  Vec4Plan plan;
  if (p.in_dtype != GK_DTYPE_F32 || p.out_dtype != GK_DTYPE_F32) return plan;
  if ((p.n + kVBN - 1) / kVBN > INT32_MAX || (p.m + kVBM - 1) / kVBM > 65535) return plan;
  if (p.k > int64_t(INT32_MAX) - kVBK) return plan;
  const int nd = p.batch.ndim;
  bool a_ok = true, b_ok = true;
  if (vec4_operand_ok(p.a, p.a_sk, p.a_sm, p.batch.a_stride, nd))
    plan.a_kcontig = true;
  else
    a_ok = vec4_operand_ok(p.a, p.a_sm, p.a_sk, p.batch.a_stride, nd);
  if (vec4_operand_ok(p.b, p.b_sn, p.b_sk, p.batch.b_stride, nd))
    plan.b_kcontig = false;
  else if (vec4_operand_ok(p.b, p.b_sk, p.b_sn, p.batch.b_stride, nd))
    plan.b_kcontig = true;
  else
    b_ok = false;
  plan.applies = a_ok && b_ok;
  return plan;
}

cudaError_t run_vec4(const MatmulProblem& p, const Vec4Plan& plan, cudaStream_t stream) {
  Vec4Args args;
  args.a = static_cast<const float*>(p.a);
  args.b = static_cast<const float*>(p.b);
  args.c = static_cast<float*>(p.c);
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.a_row_stride = plan.a_kcontig ? p.a_sm : p.a_sk;
  args.b_row_stride = plan.b_kcontig ? p.b_sn : p.b_sk;
  args.c_sm = p.c_sm;
  args.c_sn = p.c_sn;
  args.batch = p.batch;
  args.batch_first = 0;
  args.ep = make_epilogue_params(p);
  const int64_t nb = p.batch_count;
  if (plan.a_kcontig)
    return plan.b_kcontig ? launch_async<true, true>(args, nb, stream)
                          : launch_async<true, false>(args, nb, stream);
  return plan.b_kcontig ? launch_async<false, true>(args, nb, stream)
                        : launch_async<false, false>(args, nb, stream);
}

}  // namespace

bool simt_gemm_can_implement(const MatmulProblem& p, std::string* why) {
  if (p.in_dtype != GK_DTYPE_F32 && p.in_dtype != GK_DTYPE_F64) {
    *why = "the SIMT path serves f32 and f64 only";
    return false;
  }
  if (p.out_dtype != p.in_dtype) {
    *why = "the SIMT path writes the input dtype only";
    return false;
  }
  if ((p.n + kTile - 1) / kTile > INT32_MAX || (p.m + kTile - 1) / kTile > 65535) {
    *why = "M over 65535·64 rows exceeds the grid";
    return false;
  }
  return true;
}

cudaError_t simt_gemm_run(const MatmulProblem& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return cudaSuccess;
  if (p.in_dtype == GK_DTYPE_F64) return launch<double>(p, stream);
  const Vec4Plan plan = plan_vec4(p);
  if (plan.applies) return run_vec4(p, plan, stream);
  return launch<float>(p, stream);
}

}  // namespace gk::matmul
