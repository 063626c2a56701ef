// sm80_gemm_mma.cu — see sm80_gemm_mma.cuh for the tiling.
#include "sm80_gemm_mma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "matmul_epilogue.cuh"
#include "mma_sync.cuh"
#include "sm80_mma_layout.h"
#include "sm80_tuning.h"

namespace gk::matmul {
namespace {

namespace lay = sm80_layout;

constexpr int kThreads = 256;  // 8 warps as 2 (M) × 4 (N), 64×32 of out each

// Per input type: the tuning entry and the k of one mma (m16n8k16 for 16-bit inputs,
// m16n8k8 for f32 read as tf32).
template <typename T>
struct MmaTraits {
  using Tuning = Sm80Tuning;
  static constexpr int kMmaK = 16;
  static constexpr bool kTf32 = false;
};
template <>
struct MmaTraits<float> {
  using Tuning = Sm80Tf32Tuning;
  static constexpr int kMmaK = 8;
  static constexpr bool kTf32 = true;
};

template <typename T>
constexpr bool warp_grid_fits() {
  using Cfg = typename MmaTraits<T>::Tuning;
  return Cfg::kBlockM == 2 * lay::kWarpM && Cfg::kBlockN == 4 * lay::kWarpN &&
         Cfg::kBlockK % MmaTraits<T>::kMmaK == 0;
}
static_assert(warp_grid_fits<__nv_bfloat16>() && warp_grid_fits<float>(),
              "the warp layout below assumes 128×128 tiles of 2×4 warps, 64×32 each");

template <typename T, bool kKMajor, int kRowsMN>
struct TileShape {
  // smem tile [rows][ld]: K-major → rows = MN, cols = K; else rows = K, cols = MN.
  static constexpr int kBK = MmaTraits<T>::Tuning::kBlockK;
  static constexpr int kVec = lay::vec_elems(sizeof(T));  // elements per 16-byte chunk
  static constexpr int kRows = kKMajor ? kRowsMN : kBK;
  static constexpr int kCols = kKMajor ? kBK : kRowsMN;
  static constexpr int kLd = lay::tile_ld(kKMajor, sizeof(T), kBK, kRowsMN);
  static constexpr int kElems = kRows * kLd;
  static constexpr int kChunksPerRow = kCols / kVec;
  static constexpr int kChunks = kRows * kChunksPerRow;
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One operand tile, global → smem. Row/col are the smem tile's; `vec_ok` means the
// global col stride is 1 and every row start is 16-byte aligned.
template <typename T, typename Shape>
__device__ __forceinline__ void load_tile(T* smem, const T* g, int64_t row0, int64_t row_limit,
                                          int64_t row_stride, int64_t col0, int64_t col_limit,
                                          int64_t col_stride, bool vec_ok) {
  static_assert(Shape::kChunks % kThreads == 0, "chunks must split evenly over threads");
  constexpr int kVec = Shape::kVec;
#pragma unroll
  for (int i = 0; i < Shape::kChunks / kThreads; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / Shape::kChunksPerRow, c = (e % Shape::kChunksPerRow) * kVec;
    T* dst = smem + r * Shape::kLd + c;
    const int64_t gr = row0 + r, gc = col0 + c;
    if (gr < row_limit && vec_ok && gc + kVec <= col_limit) {
      const T* src = g + gr * row_stride + gc;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
    } else if (gr < row_limit && gc < col_limit) {
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        dst[j] = (gc + j < col_limit) ? g[gr * row_stride + (gc + j) * col_stride] : T(0.0f);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
}

// f32 → tf32, rounded to nearest (ties away) as cuBLAS does; the mma itself would ignore
// the low 13 mantissa bits, i.e. truncate, which biases the error.
__device__ __forceinline__ uint32_t to_tf32(uint32_t f32_bits) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(f32_bits)));
  return r;
}

// The A fragments of k step kk for the warp's 4 m16 tiles (offsets: sm80_mma_layout.h).
template <typename T, bool kAK, typename Sh>
__device__ __forceinline__ void load_a_frags(uint32_t (&af)[4][4], const T* ta, int wm, int kk,
                                             int lane) {
  constexpr int kMmaK = MmaTraits<T>::kMmaK;
  if constexpr (kAK || !MmaTraits<T>::kTf32) {
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
      const int off = lay::a_ldsm_offset(kAK, Sh::kLd, Sh::kVec, kMmaK, lane, wm, mi, kk);
      ldmatrix_x4<!kAK>(af[mi], smem_addr(ta + off));
    }
  } else {
    // tf32, M-contiguous: rows g and g + 8 side by side, one 64-bit load per register pair.
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        const uint2 v = *reinterpret_cast<const uint2*>(
            ta + lay::tf32_a_mn_offset(Sh::kLd, lane, wm, mi, kk, kh));
        af[mi][2 * kh] = v.x;
        af[mi][2 * kh + 1] = v.y;
      }
  }
}

// The B fragments of k step kk for the warp's 4 n8 tiles.
template <typename T, bool kBKm, typename Sh>
__device__ __forceinline__ void load_b_frags(uint32_t (&bf)[4][2], const T* tb, int wn, int kk,
                                             int lane) {
  constexpr int kMmaK = MmaTraits<T>::kMmaK;
  if constexpr (kBKm || !MmaTraits<T>::kTf32) {
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      const int off = lay::b_ldsm_offset(kBKm, Sh::kLd, Sh::kVec, kMmaK, lane, wn, nj, kk);
      uint32_t r[4];
      ldmatrix_x4<!kBKm>(r, smem_addr(tb + off));
      bf[2 * nj][0] = r[0];
      bf[2 * nj][1] = r[1];
      bf[2 * nj + 1][0] = r[2];
      bf[2 * nj + 1][1] = r[3];
    }
  } else {
    // tf32, N-contiguous: 32-bit loads (ldmatrix.trans cannot transpose 32-bit elements).
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int kh = 0; kh < 2; ++kh)
        bf[ni][kh] = *reinterpret_cast<const uint32_t*>(
            tb + lay::tf32_b_mn_offset(Sh::kLd, lane, wn, ni, kk, kh));
  }
}

struct Sm80Args {
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k;
  int64_t a_sm, a_sk, b_sk, b_sn, c_sm, c_sn;
  BatchLayout batch;
  int64_t batch_count;
  bool a_vec, b_vec, out_f32;
  EpilogueParams ep;
};

// T: __nv_bfloat16 or __half (mma m16n8k16), or float (read as tf32, mma m16n8k8).
template <typename T, bool kAK, bool kBKm>
__global__ void __launch_bounds__(kThreads) sm80_gemm_kernel(const Sm80Args args) {
  using Tr = MmaTraits<T>;
  constexpr int kBM = Tr::Tuning::kBlockM, kBN = Tr::Tuning::kBlockN, kBK = Tr::Tuning::kBlockK;
  constexpr int kStages = Tr::Tuning::kStages;
  using ShA = TileShape<T, kAK, kBM>;
  using ShB = TileShape<T, kBKm, kBN>;
  // tf32 with an M-contiguous a pairs fragment rows g and g + 8 (sm80_mma_layout.h).
  constexpr bool kPairedRows = Tr::kTf32 && !kAK;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sa = reinterpret_cast<T*>(smem_raw);
  T* sb = sa + kStages * ShA::kElems;

  const T* a = static_cast<const T*>(args.a);
  const T* b = static_cast<const T*>(args.b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp tile kWarpM × kWarpN = 64×32
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int k_tiles = int((args.k + kBK - 1) / kBK);

  for (int64_t bi = blockIdx.z; bi < args.batch_count; bi += gridDim.z) {
    int64_t oa, ob, oc;
    batch_offsets(args.batch, bi, &oa, &ob, &oc);
    const T* ga = a + oa;
    const T* gb = b + ob;

    auto load_stage = [&](int stage, int kt) {
      const int64_t k0 = int64_t(kt) * kBK;
      if constexpr (kAK)
        load_tile<T, ShA>(sa + stage * ShA::kElems, ga, m0, args.m, args.a_sm, k0, args.k,
                          args.a_sk, args.a_vec);
      else
        load_tile<T, ShA>(sa + stage * ShA::kElems, ga, k0, args.k, args.a_sk, m0, args.m,
                          args.a_sm, args.a_vec);
      if constexpr (kBKm)
        load_tile<T, ShB>(sb + stage * ShB::kElems, gb, n0, args.n, args.b_sn, k0, args.k,
                          args.b_sk, args.b_vec);
      else
        load_tile<T, ShB>(sb + stage * ShB::kElems, gb, k0, args.k, args.b_sk, n0, args.n,
                          args.b_sn, args.b_vec);
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles) load_stage(s, s);
      asm volatile("cp.async.commit_group;\n" ::);
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
      asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
      __syncthreads();
      const int next = kt + kStages - 1;
      if (next < k_tiles) load_stage(next % kStages, next);
      asm volatile("cp.async.commit_group;\n" ::);

      const T* ta = sa + (kt % kStages) * ShA::kElems;
      const T* tb = sb + (kt % kStages) * ShB::kElems;
#pragma unroll
      for (int kk = 0; kk < kBK / Tr::kMmaK; ++kk) {
        uint32_t af[4][4], bf[4][2];
        load_a_frags<T, kAK, ShA>(af, ta, wm, kk, lane);
        load_b_frags<T, kBKm, ShB>(bf, tb, wn, kk, lane);
        if constexpr (Tr::kTf32) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int r = 0; r < 4; ++r) af[i][r] = to_tf32(af[i][r]);
#pragma unroll
            for (int r = 0; r < 2; ++r) bf[i][r] = to_tf32(bf[i][r]);
          }
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) mma_sync<T>(acc[mi][ni], af[mi], bf[ni]);
      }
    }
    // Drain the (empty) trailing groups and make the smem reusable by the next batch.
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();

    const int g = lane / 4, tig = lane % 4;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = m0 + wm * lay::kWarpM + lay::warp_row(kPairedRows, mi, h, g);
        if (row >= args.m) continue;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int64_t col = n0 + wn * lay::kWarpN + ni * 8 + tig * 2 + j;
            if (col >= args.n) continue;
            const int64_t off = oc + row * args.c_sm + col * args.c_sn;
            const float v = acc[mi][ni][h * 2 + j];
            if (args.out_f32)
              store_epilogue<T, float>(args.ep, static_cast<float*>(args.c), off, col, v);
            else
              store_epilogue<T, T>(args.ep, static_cast<T*>(args.c), off, col, v);
          }
      }
  }
}

template <typename T, bool kAK, bool kBKm>
cudaError_t launch(const Sm80Args& args, cudaStream_t stream) {
  using Cfg = typename MmaTraits<T>::Tuning;
  constexpr size_t smem =
      size_t(Cfg::kStages) *
      (TileShape<T, kAK, Cfg::kBlockM>::kElems + TileShape<T, kBKm, Cfg::kBlockN>::kElems) *
      sizeof(T);
  static_assert(smem <= 99 * 1024, "over the 99 KB a block may have on sm86/sm89");
  auto kernel = sm80_gemm_kernel<T, kAK, kBKm>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(unsigned((args.n + Cfg::kBlockN - 1) / Cfg::kBlockN),
                  unsigned((args.m + Cfg::kBlockM - 1) / Cfg::kBlockM),
                  unsigned(args.batch_count < 65535 ? args.batch_count : 65535));
  kernel<<<grid, kThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch_layout(const Sm80Args& args, bool a_kmajor, bool b_kmajor,
                            cudaStream_t stream) {
  if (a_kmajor)
    return b_kmajor ? launch<T, true, true>(args, stream) : launch<T, true, false>(args, stream);
  return b_kmajor ? launch<T, false, true>(args, stream) : launch<T, false, false>(args, stream);
}

// 16-byte chunks need the contiguous dim at stride 1 and every row / batch start aligned.
bool vec_loads_ok(const void* base, int64_t contiguous_stride, int64_t row_stride,
                  const int64_t* batch_strides, int batch_ndim, int64_t vec_elems) {
  if (contiguous_stride != 1 || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  if (row_stride % vec_elems != 0) return false;
  for (int d = 0; d < batch_ndim; ++d)
    if (batch_strides[d] % vec_elems != 0) return false;
  return true;
}

}  // namespace

bool sm80_gemm_can_implement(const MatmulProblem& p, std::string* why) {
  const bool tf32 = p.in_dtype == GK_DTYPE_F32 && p.allow_tf32;
  if (p.in_dtype != GK_DTYPE_BF16 && p.in_dtype != GK_DTYPE_F16 && !tf32) {
    *why = p.in_dtype == GK_DTYPE_F32
               ? "the mma.sync path takes f32 only as tf32 (precision=\"tf32\"); full f32 runs "
                 "on the SIMT kernels"
               : "the mma.sync path serves bf16, f16 and f32 as tf32";
    return false;
  }
  if (p.out_dtype != p.in_dtype && p.out_dtype != GK_DTYPE_F32) {
    *why = "out dtype must be the input dtype or f32";
    return false;
  }
  // Both tunings use 128×128 tiles; K-tiles are 32 (16-bit) or 16 (tf32) elements.
  static_assert(Sm80Tuning::kBlockM == Sm80Tf32Tuning::kBlockM, "one M limit for both");
  constexpr int64_t kBM = Sm80Tuning::kBlockM;
  const int64_t bk = tf32 ? Sm80Tf32Tuning::kBlockK : Sm80Tuning::kBlockK;
  if ((p.m + kBM - 1) / kBM > 65535) {
    *why = "M over 65535·128 rows exceeds the grid";
    return false;
  }
  if (p.k > int64_t(INT32_MAX) - bk) {
    *why = "K over 2^31 is not supported";
    return false;
  }
  return true;
}

cudaError_t sm80_gemm_run(const MatmulProblem& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return cudaSuccess;
  Sm80Args args;
  args.a = p.a;
  args.b = p.b;
  args.c = p.c;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.a_sm = p.a_sm;
  args.a_sk = p.a_sk;
  args.b_sk = p.b_sk;
  args.b_sn = p.b_sn;
  args.c_sm = p.c_sm;
  args.c_sn = p.c_sn;
  args.batch = p.batch;
  args.batch_count = p.batch_count;
  args.out_f32 = p.out_dtype == GK_DTYPE_F32;
  args.ep = make_epilogue_params(p);
  // Pick the smem layout that keeps the operand's unit-stride dim along smem rows.
  const bool a_kmajor = p.a_sk == 1 || p.a_sm != 1;
  const bool b_kmajor = p.b_sk == 1 && p.b_sn != 1;
  const int64_t vec = 16 / int64_t(dtype_bytes(p.in_dtype));
  args.a_vec = a_kmajor ? vec_loads_ok(p.a, p.a_sk, p.a_sm, p.batch.a_stride, p.batch.ndim, vec)
                        : vec_loads_ok(p.a, p.a_sm, p.a_sk, p.batch.a_stride, p.batch.ndim, vec);
  args.b_vec = b_kmajor ? vec_loads_ok(p.b, p.b_sk, p.b_sn, p.batch.b_stride, p.batch.ndim, vec)
                        : vec_loads_ok(p.b, p.b_sn, p.b_sk, p.batch.b_stride, p.batch.ndim, vec);
  if (p.in_dtype == GK_DTYPE_F32) return dispatch_layout<float>(args, a_kmajor, b_kmajor, stream);
  if (p.in_dtype == GK_DTYPE_BF16)
    return dispatch_layout<__nv_bfloat16>(args, a_kmajor, b_kmajor, stream);
  return dispatch_layout<__half>(args, a_kmajor, b_kmajor, stream);
}

}  // namespace gk::matmul
