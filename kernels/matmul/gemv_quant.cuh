// gemv_quant.cuh — skinny matmul with a GGUF block-quantized weight, read packed:
// out[M, N] (f32) = act(alpha · a[M, K] · dequant(b[N, K])ᵀ + beta · out + bias), b in q8_0,
// q4_0, q4_1 or q4_k as the file stores it (kernels/quant/gguf_blocks.h has the formats).
//
// A decode step streams every weight byte once; the kernel is built for that stream.
//
//   host: for each pass over rows of a (MR = 1, 2, 4 or 8 rows, as many as shared memory
//         holds for this K):
//     grid: min(ceil(N / kWarps), SMs · kCtasPerSm) CTAs of kWarps warps
//     CTA:  (each warp's first weight chunk already requested, see below)
//           a[pass rows, :] → shared memory as f32, each 32-element group followed by its
//           sum (4 floats of padding: a lane's group starts 36 floats after its neighbour's,
//           so float4 reads of 8 lanes hit 8 distinct bank quads)
//     warp: for each weight row n it owns (n = warp's first row + k · gridDim · kWarps):
//             for each chunk of the row (64 blocks, or 16 q4_k super-blocks):
//               16-byte loads (ld.global.cs) of the chunk's bytes into registers, issued
//               for the next chunk (of this row or the warp's next row) before this one
//               is decoded; then stored to the warp's shared slice
//               lane: 2 blocks (or 2 × 64 elements of a q4_k super-block) decoded from
//                     shared memory into exact small-integer floats (magic-number
//                     conversion, no I2F), dotted with each row of a: acc[m] += d · Σ a·q
//                     (+ m · Σ a for q4_1 / q4_k, from the group sums)
//             warp-shuffle reduce of acc[m]; lane 0 writes the epilogue
// f32 accumulation. Blocks are 18, 20 or 34 bytes, so a chunk's 16-byte segments are read
// from the segment holding its first byte to the one holding its last: never outside the
// 16-byte segments the weight covers (b's base must be 16-byte aligned).
#ifndef GPUKIT_KERNELS_MATMUL_GEMV_QUANT_CUH_
#define GPUKIT_KERNELS_MATMUL_GEMV_QUANT_CUH_

#include <cuda_runtime.h>

#include <string>

#include "matmul_problem.h"

namespace gk::matmul {

// Whether `dtype` is a weight format gemv_quant reads (q8_0, q4_0, q4_1, q4_k).
bool gemv_quant_dtype(int32_t dtype);

// True when gemv_quant_run can serve the problem (p.b_dtype block-quantized, b [N, K] read
// with transpose_b, a K-contiguous f32/f16/bf16, out f32, no batch dims); else *why says
// what is refused.
bool gemv_quant_can_implement(const MatmulProblem& p, std::string* why);

// Enqueues the product on `stream`, on grids sized for `sm_count` SMs.
cudaError_t gemv_quant_run(const MatmulProblem& p, int sm_count, cudaStream_t stream);

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_GEMV_QUANT_CUH_
