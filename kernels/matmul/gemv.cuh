// gemv.cuh — skinny matmul for decode: one row of `a` times a weight matrix stored
// K-contiguous (nn.Linear's [N, K] with transpose_b, the layout of every llm projection).
//
// A decode step of one sequence reads each weight once and does one multiply-add per weight:
// it is bound by the weight stream, and tile-based GEMM kernels (128-row tiles, split-K
// reductions) waste most of their work and extra launches on it. Here each warp owns output
// columns (weight rows): its lanes stream the row in 16-byte loads, eight in flight per lane,
// multiply them with the row of `a` (small, served by L1/L2), reduce across the warp, and
// lane 0 writes the output through the shared epilogue (alpha, beta, bias, activation).
// f32 accumulation; bf16/f16 inputs; out in the input dtype or f32.
#ifndef GPUKIT_KERNELS_MATMUL_GEMV_CUH_
#define GPUKIT_KERNELS_MATMUL_GEMV_CUH_

#include <cuda_runtime.h>

#include <string>

#include "matmul_problem.h"

namespace gk::matmul {

// The most rows of `a` the plugin takes. Each weight element costs M multiply-adds and M
// conversions of `a` on the CUDA cores; on an H200 the kernel ran 2×8192×2048 bf16 at 0.74×
// cuBLAS's speed and 4× at 0.53× (1× at 0.9×, and 1.85× on 2048×2048), so from two rows
// on the tensor-core GEMMs serve.
inline constexpr int64_t kGemvMaxRows = 1;

// True when gemv_run can serve the problem; otherwise *why says what is refused.
bool gemv_can_implement(const MatmulProblem& p, std::string* why);

// Enqueues the product on `stream`, on a grid sized for the device's `sm_count` SMs (the
// current device's; the plugin has it from the host, so no launch queries it).
cudaError_t gemv_run(const MatmulProblem& p, int sm_count, cudaStream_t stream);

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_GEMV_CUH_
