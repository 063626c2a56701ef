// sm80_gemm_mma.cuh — matmul on sm80+ tensor cores (mma.sync): bf16/f16 (m16n8k16) and f32
// read as tf32 (m16n8k8, only for precision="tf32"); any M, N, K, any strides, batched,
// f32 accumulation.
//
// Tiling (grid = [ceil(N/128), ceil(M/128), batch], 256 threads = 8 warps as 2(M)×4(N)):
//   block (128×128 tile of out):
//     prologue: stages 0..kStages-2 ← k-tiles 0..kStages-2           (cp.async groups)
//     for kt in 0..ceil(K/BK):                                       // block owns K loop
//       wait for k-tile kt; __syncthreads
//       issue cp.async for k-tile kt+kStages-1 into the stage freed last iteration
//       warp (64×32 of out, acc[4][4][4] f32 in registers):
//         for kk in 0..2:                                            // k16 / k8 steps
//           load 4 A fragments (m16×k), 4 B fragments (k×n8)
//           tf32: round each fragment element to nearest (cvt.rna.tf32.f32)
//           16 × mma (m16n8k16 bf16/f16, m16n8k8 tf32)
//   epilogue straight from registers: act(alpha·acc + beta·out + bias[n]), predicated.
// bf16/f16: BK = 32, 4 stages (Sm80Tuning); tf32: BK = 16, 4 stages (Sm80Tf32Tuning): both
// 64 bytes of k per smem row and 20 KB per stage.
// Shared memory per stage: the A tile as [128 m][BK + 16 B] when a is K-contiguous, else
// [BK k][128 + 8 m]; B likewise (sm80_mma_layout.h has the pads and why).
// Fragment loads: K-major tiles with ldmatrix.x4 for every dtype (a 32-bit element is two
// b16 halves, and ldmatrix hands lane l column l%4 of each 8×4 block: the tf32 layout);
// MN-major 16-bit tiles with ldmatrix.x4.trans; MN-major tf32 tiles, which ldmatrix cannot
// transpose, with 64-bit loads for A (fragment rows g and g+8 stored side by side, the
// epilogue maps them back) and 32-bit loads for B.
// Global→smem: 16-byte cp.async per chunk (8 bf16/f16 or 4 f32) when the operand is
// contiguous along the smem row and 16-byte aligned; otherwise (odd strides, tails) element
// loads with zero fill, so no shape is refused.
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
