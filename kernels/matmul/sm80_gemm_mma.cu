// sm80_gemm_mma.cu — see sm80_gemm_mma.cuh for the tiling.
#include "sm80_gemm_mma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "matmul_epilogue.cuh"
#include "sm80_tuning.h"

namespace gk::matmul {
namespace {

using Cfg = Sm80Tuning;
constexpr int kBM = Cfg::kBlockM, kBN = Cfg::kBlockN, kBK = Cfg::kBlockK;
constexpr int kStages = Cfg::kStages;
constexpr int kThreads = 256;
constexpr int kPad = 8;  // elements; see the header comment

template <bool kKMajor, int kRowsMN>
struct TileShape {
  // smem tile [rows][ld]: K-major → rows = MN, cols = K; else rows = K, cols = MN.
  static constexpr int kRows = kKMajor ? kRowsMN : kBK;
  static constexpr int kCols = kKMajor ? kBK : kRowsMN;
  static constexpr int kLd = kCols + kPad;
  static constexpr int kElems = kRows * kLd;
  static constexpr int kChunksPerRow = kCols / 8;
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
#pragma unroll
  for (int i = 0; i < Shape::kChunks / kThreads; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / Shape::kChunksPerRow, c = (e % Shape::kChunksPerRow) * 8;
    T* dst = smem + r * Shape::kLd + c;
    const int64_t gr = row0 + r, gc = col0 + c;
    if (gr < row_limit && vec_ok && gc + 8 <= col_limit) {
      const T* src = g + gr * row_stride + gc;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)),
                   "l"(src));
    } else if (gr < row_limit && gc < col_limit) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
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

template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
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

template <typename T, bool kAK, bool kBKm>
__global__ void __launch_bounds__(kThreads) sm80_gemm_kernel(const Sm80Args args) {
  using ShA = TileShape<kAK, kBM>;
  using ShB = TileShape<kBKm, kBN>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sa = reinterpret_cast<T*>(smem_raw);
  T* sb = sa + kStages * ShA::kElems;

  const T* a = static_cast<const T*>(args.a);
  const T* b = static_cast<const T*>(args.b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp tile 64×32
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
      for (int kk = 0; kk < kBK / 16; ++kk) {
        uint32_t af[4][4], bf[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          const int mb = wm * 64 + mi * 16;
          const T* p;
          if constexpr (kAK)
            p = ta + (mb + lane % 16) * ShA::kLd + kk * 16 + (lane / 16) * 8;
          else
            p = ta + (kk * 16 + lane % 8 + (lane / 16) * 8) * ShA::kLd + mb + ((lane / 8) % 2) * 8;
          ldmatrix_x4<!kAK>(af[mi], smem_addr(p));
        }
#pragma unroll
        for (int nj = 0; nj < 2; ++nj) {
          const int nb = wn * 32 + nj * 16;
          const T* p;
          if constexpr (kBKm)
            p = tb + (nb + lane % 8 + (lane / 16) * 8) * ShB::kLd + kk * 16 + ((lane / 8) % 2) * 8;
          else
            p = tb + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * ShB::kLd + nb + (lane / 16) * 8;
          uint32_t r[4];
          ldmatrix_x4<!kBKm>(r, smem_addr(p));
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) mma_16816<T>(acc[mi][ni], af[mi], bf[ni]);
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
        const int64_t row = m0 + wm * 64 + mi * 16 + g + h * 8;
        if (row >= args.m) continue;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int64_t col = n0 + wn * 32 + ni * 8 + tig * 2 + j;
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
  constexpr size_t smem =
      size_t(kStages) * (TileShape<kAK, kBM>::kElems + TileShape<kBKm, kBN>::kElems) * sizeof(T);
  auto kernel = sm80_gemm_kernel<T, kAK, kBKm>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(unsigned((args.n + kBN - 1) / kBN), unsigned((args.m + kBM - 1) / kBM),
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
                  const int64_t* batch_strides, int batch_ndim) {
  if (contiguous_stride != 1 || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  if (row_stride % 8 != 0) return false;
  for (int d = 0; d < batch_ndim; ++d)
    if (batch_strides[d] % 8 != 0) return false;
  return true;
}

}  // namespace

bool sm80_gemm_can_implement(const MatmulProblem& p, std::string* why) {
  if (p.in_dtype != GK_DTYPE_BF16 && p.in_dtype != GK_DTYPE_F16) {
    *why = "the mma.sync path serves bf16 and f16 inputs only";
    return false;
  }
  if (p.out_dtype != p.in_dtype && p.out_dtype != GK_DTYPE_F32) {
    *why = "out dtype must be the input dtype or f32";
    return false;
  }
  if ((p.m + kBM - 1) / kBM > 65535) {
    *why = "M over 65535·128 rows exceeds the grid";
    return false;
  }
  if (p.k > int64_t(INT32_MAX) - kBK) {
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
  args.a_vec = a_kmajor ? vec_loads_ok(p.a, p.a_sk, p.a_sm, p.batch.a_stride, p.batch.ndim)
                        : vec_loads_ok(p.a, p.a_sm, p.a_sk, p.batch.a_stride, p.batch.ndim);
  args.b_vec = b_kmajor ? vec_loads_ok(p.b, p.b_sk, p.b_sn, p.batch.b_stride, p.batch.ndim)
                        : vec_loads_ok(p.b, p.b_sn, p.b_sk, p.batch.b_stride, p.batch.ndim);
  if (p.in_dtype == GK_DTYPE_BF16)
    return dispatch_layout<__nv_bfloat16>(args, a_kmajor, b_kmajor, stream);
  return dispatch_layout<__half>(args, a_kmajor, b_kmajor, stream);
}

}  // namespace gk::matmul
