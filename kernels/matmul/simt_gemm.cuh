// simt_gemm.cuh — matmul on the CUDA cores for f32 and f64, any strides, any shape.
//
// The path for f32 at precision "highest" (tensor cores would round to tf32) and f64.
// Tiling (one launch, grid = [ceil(N/64), ceil(M/64), batch]):
//   block  (64×64 tile of out, 256 threads):
//     for k0 in 0..K step 8:                      // block owns the K loop
//       smem As[8][64] ← a[m0.., k0..]            // element loads, any stride, zero-padded
//       smem Bs[8][64] ← b[k0.., n0..]
//       thread (16×16 grid): for kk in 0..8:      // 4×4 outer product in registers
//         acc[4][4] += As[kk][ty*4+i] · Bs[kk][tx*4+j]
//   epilogue per element: act(alpha·acc + beta·out + bias[n]), predicated on M, N.
// Accumulation is f32 for f32 and f64 for f64.
#ifndef GPUKIT_KERNELS_MATMUL_SIMT_GEMM_CUH_
#define GPUKIT_KERNELS_MATMUL_SIMT_GEMM_CUH_

#include <cuda_runtime.h>

#include <string>

#include "matmul_problem.h"

namespace gk::matmul {

// True when simt_gemm_run can serve the problem; otherwise *why says what is refused.
bool simt_gemm_can_implement(const MatmulProblem& p, std::string* why);

// Queues the product on `stream`. Returns the first CUDA error.
cudaError_t simt_gemm_run(const MatmulProblem& p, cudaStream_t stream);

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_SIMT_GEMM_CUH_
