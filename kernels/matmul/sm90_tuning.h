// sm90_tuning.h — the tuning table of sm90_gemm_tma_ws.cu (H100 / H200, sm_90a).
//
// Each constant names the measurement behind it; docs/kernels/matmul.md has the tables.
#ifndef GPUKIT_KERNELS_MATMUL_SM90_TUNING_H_
#define GPUKIT_KERNELS_MATMUL_SM90_TUNING_H_

namespace gk::matmul {

struct Sm90Tuning {
  // 128×256 per CTA, two consumer warpgroups of 64×256: the largest tile whose f32
  // accumulators (128 registers per thread) fit beside the addressing in 232 registers;
  // it halves smem traffic per flop against 128×128 (the fast.cu / CUTLASS default
  // for bf16 on H100). Not yet swept: with it the kernel measures 289.6 TFLOP/s on
  // 4096³ bf16 and 425.1 on 8192³ (H100 SXM, cuBLAS 781 / 746 in the same process,
  // 2026-11 run 2, docs/kernels/matmul.md).
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 256;
  // A k-tile is one 128-byte swizzle row per M/N row: 64 bf16/f16 or 32 tf32 elements, so
  // the stage layout (and its 48 KB) is the same for every input dtype.
  static constexpr int kBlockKBytes = 128;
  // 4 × 48 KB = 192 KB of the 227 KB a CTA may have; 5 would not fit.
  static constexpr int kStages = 4;
  // Tiles walk 16 M-tiles down before moving right, so concurrent CTAs share B panels
  // in L2.
  static constexpr int kGroupM = 16;
  // Two CTAs on adjacent M-tiles form a cluster and share each B tile (256×64) by TMA
  // multicast: per CTA and k-tile 32 KB instead of 48 KB cross from L2. Without it the
  // kernel ran 4096³ bf16 at 0.90× cuBLAS but 8192³ and 4096×14336×4096 at 0.80–0.92×:
  // slower where more data crosses.
  static constexpr int kClusterM = 2;
};

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_SM90_TUNING_H_
