// sm80_tuning.h — the tuning tables of matmul_sm80: the mma.sync kernel (sm80_gemm_mma.cu,
// bf16/f16 and tf32) and the 128×128 f32 SIMT kernel (simt_gemm.cu).
//
// One entry for every SM the kernel is built for (80, 86, 89, and 90 as a fallback where
// matmul_sm90 declines). No measurement on an A100/RTX-class GPU has been made yet: the
// shapes are the usual Ampere starting point (CUTLASS's 128×128×32, 4 stages, 8 warps),
// kept so that 4 stages fit the 99 KB smem limit of sm86/sm89. See docs/kernels/matmul.md.
#ifndef GPUKIT_KERNELS_MATMUL_SM80_TUNING_H_
#define GPUKIT_KERNELS_MATMUL_SM80_TUNING_H_

namespace gk::matmul {

struct Sm80Tuning {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  static constexpr int kBlockK = 32;
  static constexpr int kStages = 4;  // 4 × 20 KB = 80 KB smem (≤ 99 KB on sm86/sm89)
};

// The tf32 path of the same kernel (f32 inputs with precision "tf32", mma.sync m16n8k8):
// same 8 warps and 64×32 warp tiles. BK = 16 f32 is 64 bytes per row, as BK = 32 is for
// bf16, so a stage is again 20 KB (A and B each ≤ 128 × (16 + 4) × 4 bytes) and 4 stages
// take 80 KB; BK = 32 with 3 stages would take 108 KB, over sm86/sm89's 99 KB. Unmeasured
// on Ampere (no A100/RTX-class GPU yet); to be measured on the H100 against cuBLAS tf32.
struct Sm80Tf32Tuning {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  static constexpr int kBlockK = 16;
  static constexpr int kStages = 4;  // 4 × 20 KB = 80 KB smem
};

// The f32 SIMT kernel with 16-byte loads (simt_gemm.cu): the usual well-tuned SGEMM shape
// on Ampere (128×128 per block, BK = 8, 256 threads with 8×8 outputs each, double-buffered
// smem, 2 blocks per SM at ≤ 128 registers). H100, 4096³: 46.3-47.2 TFLOP/s, 0.92× cuBLAS
// with whole tiles. There BK = 16 read
// 0.88-0.89× and one block per SM (143-145 registers) 0.78-0.89×; cp.async pipelines of
// 128×256 and 128×128 read 0.64-0.72×.
struct Sm80SimtTuning {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  static constexpr int kBlockK = 8;
  static constexpr int kThreads = 256;   // 16×16 threads, 8×8 outputs each
  static constexpr int kMinBlocksPerSm = 2;  // caps registers at 128 per thread
  // Tiles walk kGroupM M-tiles down before moving right, so blocks resident at the same
  // time share A and B panels in L2.
  static constexpr int kGroupM = 8;
};

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_SM80_TUNING_H_
