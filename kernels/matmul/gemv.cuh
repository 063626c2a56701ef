// gemv.cuh — skinny matmul for decode: up to 64 rows of `a` times a weight matrix stored
// K-contiguous (nn.Linear's [N, K] with transpose_b, the layout of every llm projection).
//
// A decode step of one sequence reads each weight once and does one multiply-add per weight:
// it is bound by the weight stream, and tile-based GEMM kernels (128-row tiles, split-K
// reductions) waste most of their work and extra launches on it. Here each warp owns output
// columns (weight rows): its lanes stream the row in 16-byte loads, eight in flight per lane,
// multiply them with the row of `a` (small, served by L1/L2), reduce across the warp, and
// lane 0 writes the output through the shared epilogue (alpha, beta, bias, activation).
// From two rows (a batch of sequences) the same stream feeds tensor cores instead: each
// 16-byte weight load is an mma.sync B fragment for every 16 rows of `a`, so a decode batch
// reads each weight once whatever its size. f32 accumulation; bf16/f16 inputs; out in the
// input dtype or f32.
#ifndef GPUKIT_KERNELS_MATMUL_GEMV_CUH_
#define GPUKIT_KERNELS_MATMUL_GEMV_CUH_

#include <cuda_runtime.h>

#include <string>

#include "matmul_problem.h"

namespace gk::matmul {

// The most rows of `a` the plugin takes: one row runs on the CUDA cores (one multiply-add per
// weight), 2..64 rows on tensor cores (mma.sync, up to four m-tiles of 16 per weight load).
// From two rows it serves only products with a bias in the input dtype and f32 out: cuBLASLt
// declines those, and the 128-row tile kernels below it ran them at 0.15-0.3x cuBLAS's
// speed where this kernel runs 0.6-0.8x (1.9x on 16x384x384); cuBLASLt serves the rest.
inline constexpr int64_t kGemvMaxRows = 64;

// True when gemv_run can serve the problem; otherwise *why says what is refused.
bool gemv_can_implement(const MatmulProblem& p, std::string* why);

// Enqueues the product on `stream`, on a grid sized for the device's `sm_count` SMs (the
// current device's; the plugin has it from the host, so no launch queries it).
cudaError_t gemv_run(const MatmulProblem& p, int sm_count, cudaStream_t stream);

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_GEMV_CUH_
