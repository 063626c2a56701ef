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

  // Reads this thread's chunk of the k-tile starting at k0 and moves on by `step` elements
  // (the next k-tile). kChecked: zero-fills outside M/N and K; without it the caller
  // guarantees the whole k-tile lies inside them.
  template <bool kChecked>
  __device__ __forceinline__ void load(int k0, int64_t step, float (&v)[4]) {
    const bool whole = !kChecked || (kKContig ? k0 + 4 <= k_lim : k0 < k_lim && cols == 4);
    if (whole) {
      const float4 q = *reinterpret_cast<const float4*>(ptr);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[j] = (kKContig ? k0 + j < k_lim : k0 < k_lim && j < cols) ? ptr[j] : 0.0f;
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

// k-tile kt lives in buffer kt % 2. While the block computes on it, each thread holds its
// share of k-tile kt+1 in registers and stores it into the other buffer after the compute;
// that buffer was last read in iteration kt-1, which every thread finished before the
// __syncthreads ending that iteration.
template <bool kChecked, bool kAK, bool kBK>
__device__ __forceinline__ void vec4_main_loop(Vec4Loader<kAK>& la, Vec4Loader<kBK>& lb,
                                               float (*sa)[kVBK * kVLd], float (*sb)[kVBK * kVLd],
                                               int tid, int ty, int tx, int k_tiles, int64_t a_step,
                                               int64_t b_step, float (&acc)[8][8]) {
  float ra[4], rb[4];
  la.template load<kChecked>(0, a_step, ra);
  lb.template load<kChecked>(0, b_step, rb);
  Vec4Loader<kAK>::store(sa[0], tid, ra);
  Vec4Loader<kBK>::store(sb[0], tid, rb);
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < k_tiles;
    if (more) {
      la.template load<kChecked>((kt + 1) * kVBK, a_step, ra);
      lb.template load<kChecked>((kt + 1) * kVBK, b_step, rb);
    }
    vec4_mma_tile(sa[cur], sb[cur], ty, tx, acc);
    if (more) {
      Vec4Loader<kAK>::store(sa[cur ^ 1], tid, ra);
      Vec4Loader<kBK>::store(sb[cur ^ 1], tid, rb);
    }
    __syncthreads();
  }
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
// kChecked: loads check the M, N and K edges; without it every tile lies inside M and N and
// K is a whole number of k-tiles. Two kernels rather than a branch per block, because ptxas
// gives a kernel the registers of its hungriest path: with the checked loop beside it, the
// unchecked one of a row-major b got 143 registers, one block per SM instead of two, and
// ran 3% slower.
template <bool kAK, bool kBK, bool kChecked>
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

    vec4_main_loop<kChecked>(la, lb, sa, sb, tid, ty, tx, k_tiles, a_step, b_step, acc);

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

template <bool kAK, bool kBK>
cudaError_t launch_vec4(Vec4Args args, int64_t batch_count, cudaStream_t stream) {
  // Loads without edge checks, which are a tenth of the main loop's instructions, when every
  // tile is whole.
  const bool whole_tiles = args.m % kVBM == 0 && args.n % kVBN == 0 && args.k % kVBK == 0;
  for (int64_t first = 0; first < batch_count; first += 65535) {
    const int64_t entries = batch_count - first < 65535 ? batch_count - first : 65535;
    const dim3 grid(unsigned((args.n + kVBN - 1) / kVBN), unsigned((args.m + kVBM - 1) / kVBM),
                    unsigned(entries));
    args.batch_first = first;
    if (whole_tiles) {
      simt_gemm_f32_vec4_kernel<kAK, kBK, false><<<grid, kVThreads, 0, stream>>>(args);
    } else {
      simt_gemm_f32_vec4_kernel<kAK, kBK, true><<<grid, kVThreads, 0, stream>>>(args);
    }
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
    return plan.b_kcontig ? launch_vec4<true, true>(args, nb, stream)
                          : launch_vec4<true, false>(args, nb, stream);
  return plan.b_kcontig ? launch_vec4<false, true>(args, nb, stream)
                        : launch_vec4<false, false>(args, nb, stream);
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
