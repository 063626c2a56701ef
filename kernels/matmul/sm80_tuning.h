// sm80_tuning.h — the tuning table of the sm80 mma.sync kernel (sm80_gemm_mma.cu).
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

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_SM80_TUNING_H_
