// simt_gemm.cu — see simt_gemm.cuh for the tiling.
#include "simt_gemm.cuh"

#include "matmul_epilogue.cuh"

namespace gk::matmul {
namespace {

constexpr int kTile = 64;  // BM = BN
constexpr int kTileK = 8;
constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) simt_gemm_kernel(
    const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t m, int64_t n,
    int64_t k, int64_t a_sm, int64_t a_sk, int64_t b_sk, int64_t b_sn, int64_t c_sm,
    int64_t c_sn, BatchLayout batch, int64_t batch_count, EpilogueParams ep) {
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
      static_cast<const T*>(p.a), static_cast<const T*>(p.b), static_cast<T*>(p.c), p.m, p.n,
      p.k, p.a_sm, p.a_sk, p.b_sk, p.b_sn, p.c_sm, p.c_sn, p.batch, p.batch_count,
      make_epilogue_params(p));
  return cudaGetLastError();
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
  return p.in_dtype == GK_DTYPE_F64 ? launch<double>(p, stream) : launch<float>(p, stream);
}

}  // namespace gk::matmul
