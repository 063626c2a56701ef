// sm90_gemm_tma_ws.cuh — bf16/f16/tf32 matmul on Hopper: TMA loads, wgmma, warp-specialised
// producer/consumer warpgroups over an mbarrier ring, persistent tile scheduler.
// Built only for sm_90a (wgmma and setmaxnreg exist nowhere else).
//
// Tiling: clusters of 2 CTAs on vertically adjacent 128×256 tiles (1 CTA when M ≤ 128),
// persistent, 1 CTA per SM, 384 threads = 3 warpgroups:
//   for unit in cluster id, +#clusters .. batch·⌈M/256⌉·⌈N/256⌉:  // grouped 16 M-tiles
//     producer warpgroup 0 (one thread, 40 regs):               // BK = 128 B of k:
//       for kt in 0..⌈K/BK⌉: wait empty[s] (freed by both CTAs); expect_tx(full[s], 48 KB);
//                            TMA own a[128×BK]; TMA half of b[256×BK], multicast to both
//     consumer warpgroups 1, 2 (rows 0..63 and 64..127 of the tile, 232 regs):
//       for kt: wait full[s]; 4 × wgmma.m64n256k16 (k16 steps; tf32: m64n256k8, k8 steps)
//               into acc[128] f32
//               (64×256 per warpgroup, in registers); commit; wait until only this
//               k-tile's group is pending, then arrive empty[s-1] in both CTAs
//       epilogue: act(alpha·acc + beta·out + bias[n]) → global; alpha-only whole tiles
//       through shared memory as 16-byte row stores (docs/kernels/matmul.md).
// Shared memory: kStages stages × (A 16 KB + B 32 KB), each tile in the 128-byte
// swizzle that TMA writes and wgmma reads. A K-contiguous operand is one TMA box
// [rows][64 k]; an M/N-contiguous one is boxes of [64 k][64 mn] read with wgmma's
// transpose bit, so row-major, transposed and Linear-style weights all go through TMA.
// tf32 (f32 with precision="tf32"): the same bytes, 32 f32 per 128-byte row, rounded to
// tf32 by TMA; its wgmma has no transpose bit, so only K-contiguous a and b are served.
#ifndef GPUKIT_KERNELS_MATMUL_SM90_GEMM_TMA_WS_CUH_
#define GPUKIT_KERNELS_MATMUL_SM90_GEMM_TMA_WS_CUH_

#include <cuda.h>  // types only: CUtensorMap & co; the driver is never linked
#include <cuda_runtime.h>

#include <string>

#include "matmul_problem.h"

namespace gk::matmul {

// cuTensorMapEncodeTiled, found at run time (host->cuda_driver_symbol or
// cudaGetDriverEntryPoint).
using TensorMapEncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                       const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                       const cuuint32_t*, CUtensorMapInterleave,
                                       CUtensorMapSwizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill);

// True when sm90_gemm_run can serve the problem; otherwise *why says what is refused.
// With `encode`, also asks the driver to accept the tensor maps (data may be NULL).
bool sm90_gemm_can_implement(const MatmulProblem& p, TensorMapEncodeFn encode,
                             std::string* why);

// Queues the product on `stream` for the current device (sm_90a, `sm_count` SMs).
// A tensor-map encoding failure comes back as cudaErrorInvalidValue with *why set.
cudaError_t sm90_gemm_run(const MatmulProblem& p, TensorMapEncodeFn encode, int sm_count,
                          cudaStream_t stream, std::string* why);

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_SM90_GEMM_TMA_WS_CUH_
