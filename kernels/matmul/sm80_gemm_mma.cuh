// sm80_gemm_mma.cuh — bf16/f16 matmul on sm80+ tensor cores (mma.sync m16n8k16),
// any M, N, K, any strides, batched, f32 accumulation.
//
// Tiling (grid = [ceil(N/128), ceil(M/128), batch], 256 threads = 8 warps as 2(M)×4(N)):
//   block (128×128 tile of out):
//     prologue: stages 0..kStages-2 ← k-tiles 0..kStages-2           (cp.async groups)
//     for kt in 0..ceil(K/32):                                       // block owns K loop
//       wait for k-tile kt; __syncthreads
//       issue cp.async for k-tile kt+kStages-1 into the stage freed last iteration
//       warp (64×32 of out, acc[4][4][4] f32 in registers):
//         for kk in 0..2:                                            // k16 steps
//           ldmatrix(.trans) 4 A fragments (m16×k16), 2×x4 B fragments (k16×n16)
//           16 × mma.m16n8k16
//   epilogue straight from registers: act(alpha·acc + beta·out + bias[n]), predicated.
// Shared memory per stage: the A tile as [128 m][32+8 k] when a is K-contiguous, else
// [32 k][128+8 m] (read with ldmatrix.trans); B likewise. The +8 pad puts the 8 rows an
// ldmatrix reads in 8 different 16-byte bank groups.
// Global→smem: 16-byte cp.async per 8-element chunk when the operand is contiguous along
// the smem row and 16-byte aligned; otherwise (odd strides, tails) element loads with
// zero fill, so no shape is refused.
#ifndef GPUKIT_KERNELS_MATMUL_SM80_GEMM_MMA_CUH_
#define GPUKIT_KERNELS_MATMUL_SM80_GEMM_MMA_CUH_

#include <cuda_runtime.h>

#include <string>

#include "matmul_problem.h"

namespace gk::matmul {

// True when sm80_gemm_run can serve the problem; otherwise *why says what is refused.
bool sm80_gemm_can_implement(const MatmulProblem& p, std::string* why);

// Queues the product on `stream` (the current device must be sm80+). First CUDA error.
cudaError_t sm80_gemm_run(const MatmulProblem& p, cudaStream_t stream);

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_SM80_GEMM_MMA_CUH_
