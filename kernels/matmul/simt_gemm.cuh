// simt_gemm.cuh — matmul on the CUDA cores for f32 and f64, any strides, any shape.
//
// The path for f32 at precision "highest" (tensor cores would round to tf32; matmul_sm80
// sends "tf32" to sm80_gemm_mma) and f64. Two kernels:
//
// 1. f32 with 16-byte loads (simt_gemm_f32_vec4_kernel), chosen when a and b each have a
//    unit-stride dim (either one), a 16-byte aligned base and row / batch strides that are
//    multiples of 4 elements. Tuning: Sm80SimtTuning (sm80_tuning.h).
//    grid = [⌈N/128⌉, ⌈M/128⌉, batch entries (slices of 65535)]; 256 threads
//    block → tile (tm, tn), walking 8 M-tiles down before moving right (L2 reuse)
//    block (128×128 tile of out):
//      smem As[2][8 k][128+4 m], Bs[2][8 k][128+4 n]          // double-buffered k-tiles
//      prologue: k-tile 0 → As[0], Bs[0]; __syncthreads
//      for kt in 0..⌈K/8⌉:                                     // block owns the K loop
//        regs ← k-tile kt+1: one float4 of a and one of b per thread (zero-filled at edges;
//               a second kernel without the edge checks runs when every tile is whole)
//        thread (ty, tx) of 16×16, a warp = 4 ty × 8 tx:       // 8×8 outer products
//          for kk in 0..8:
//            a4 ← As[kk][ty·4..+4], As[kk][64+ty·4..+4]        // float4 smem reads
//            b4 ← Bs[kk][tx·4..+4], Bs[kk][64+tx·4..+4]
//            acc[8][8] += a ⊗ b                                // f32 FFMA
//        regs → As/Bs[(kt+1)%2]; __syncthreads                 // one barrier per k-tile
//    A K-contiguous operand (row-major a, transposed b) is read as float4 along k by two
//    threads per row and stored transposed (k-major) into smem; the +4 pad puts k rows 0
//    and 4 on different banks, so those scalar stores do not conflict. An M/N-contiguous
//    operand is read as float4 rows of 128 and stored as is.
//    epilogue: alpha-only, whole tile in bounds, row-contiguous 16-byte aligned out →
//    float4 stores of alpha·acc; anything else → act(alpha·acc + beta·out + bias[n]) per
//    element in a rolled loop over a copy of acc, predicated on M, N, any out strides.
//
// 2. general (simt_gemm_kernel): f64, and f32 operands the first kernel cannot read
//    (odd strides, misaligned views). grid = [ceil(N/64), ceil(M/64), batch]:
//    block  (64×64 tile of out, 256 threads):
//      for k0 in 0..K step 8:                      // block owns the K loop
//        smem As[8][64] ← a[m0.., k0..]            // element loads, any stride, zero-padded
//        smem Bs[8][64] ← b[k0.., n0..]
//        thread (16×16 grid): for kk in 0..8:      // 4×4 outer product in registers
//          acc[4][4] += As[kk][ty*4+i] · Bs[kk][tx*4+j]
//    epilogue per element: act(alpha·acc + beta·out + bias[n]), predicated on M, N.
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
