// sm80_mma_layout.h — where sm80_gemm_mma's warps read their mma.sync fragments in shared
// memory, and which element of the warp's 64×32 slice of out each accumulator holds.
// Integer functions only, shared by the kernel and tests/kernels/sm80_mma_layout_test.cpp,
// which runs them on the host against the PTX ISA fragment layouts and checks the loads
// for bank conflicts.
//
// Fragments (PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k8"; g = lane/4, t = lane%4):
//   m16n8k16 bf16/f16, A: 4 registers of 2 elements; register r holds row g + 8·(r%2),
//     k 2t..2t+1 + 8·(r/2).  B: 2 registers; register r holds k 2t..2t+1 + 8·r, column g.
//   m16n8k8 tf32, A: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4).
//     B: b0 (k t, column g), b1 (k t+4, column g).
//   C/D (f32, both shapes): c0, c1 at row g, columns 2t, 2t+1; c2, c3 at row g+8.
// ldmatrix.x4 (b16): lanes 8i..8i+7 give the 8 row addresses of matrix i (16 bytes each);
// register i of lane l receives row l/4, 16-bit columns 2(l%4), 2(l%4)+1 of matrix i, which
// for 32-bit data is column l%4: the tf32 A and B layouts above. ldmatrix.trans transposes
// 16-bit elements only, so tf32 M/N-contiguous tiles are read with 64-bit (A) and 32-bit (B)
// shared loads instead.
//
// Shared-memory tiles are row-major [rows][ld]: a K-major tile (K-contiguous operand) has
// M or N rows and K columns, an MN-major tile K rows and M or N columns. Offsets below are
// in elements from the tile's start; wm, wn are the warp's position in the 2×4 warp grid.
#ifndef GPUKIT_KERNELS_MATMUL_SM80_MMA_LAYOUT_H_
#define GPUKIT_KERNELS_MATMUL_SM80_MMA_LAYOUT_H_

#if defined(__CUDACC__)
#define GK_SM80_LAYOUT_FN __host__ __device__ __forceinline__ constexpr
#else
#define GK_SM80_LAYOUT_FN inline constexpr
#endif

namespace gk::matmul::sm80_layout {

constexpr int kWarpM = 64;  // rows of out per warp: 4 m16 tiles
constexpr int kWarpN = 32;  // columns of out per warp: 4 n8 tiles

// Elements in 16 bytes: one cp.async chunk, one ldmatrix row.
GK_SM80_LAYOUT_FN int vec_elems(int elem_bytes) {
  return 16 / elem_bytes;
}

// Leading dimension (elements) of a smem tile. K-major rows are padded by 16 bytes, so the
// 8 consecutive rows one ldmatrix phase reads start in 8 different 16-byte bank groups.
// MN-major rows are padded by 8 elements: 16 bytes for 16-bit ldmatrix.trans (same reason);
// 32 bytes for tf32, so k rows t = 0..3 start 8 banks apart: lane (g, t) then reads bank
// 8t + g with 32-bit loads (B) and banks 8t + 2g, +1 with 64-bit loads (A, per half warp),
// 32 distinct banks either way.
GK_SM80_LAYOUT_FN int tile_ld(bool k_major, int elem_bytes, int block_k, int block_mn) {
  return k_major ? block_k + vec_elems(elem_bytes) : block_mn + 8;
}

// Row of the warp's 64-row slice that holds fragment row g + 8h of m16 tile mi. The mma
// does not care which physical row a fragment row is, so long as A and out agree. tf32 with
// an M-contiguous a (`paired`) stores rows g and g + 8 of each m16 tile side by side, so
// that a0, a1 (k t) and a2, a3 (k t + 4) are one 64-bit load each, straight into the
// register pairs the mma reads. Columns are never permuted (column c of n8 tile ni is
// column ni·8 + c): b0 and b1 lie in two k rows, so no wider load could fill a pair.
GK_SM80_LAYOUT_FN int warp_row(bool paired, int mi, int h, int g) {
  return paired ? mi * 16 + 2 * g + h : mi * 16 + h * 8 + g;
}

// ldmatrix.x4 row address of `lane` for the A fragment of m16 tile mi, k step kk (of
// mma_k elements). K-major (any dtype; vec = vec_elems): matrices (m 0-7, k 0..vec),
// (m 8-15, k 0..vec), (m 0-7, k vec..2vec), (m 8-15, k vec..2vec) → a0..a3 of m16n8k16
// and of m16n8k8 tf32 alike. MN-major (16-bit only, read with .trans): matrices (m 0-7,
// k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
GK_SM80_LAYOUT_FN int a_ldsm_offset(bool k_major, int ld, int vec, int mma_k, int lane, int wm,
                                    int mi, int kk) {
  const int m = wm * kWarpM + mi * 16;
  return k_major ? (m + lane % 16) * ld + kk * mma_k + (lane / 16) * vec
                 : (kk * mma_k + lane % 8 + (lane / 16) * 8) * ld + m + ((lane / 8) % 2) * 8;
}

// ldmatrix.x4 row address for the B fragments of n8 tiles 2nj and 2nj + 1: matrices
// (n 0-7, k 0..vec), (n 0-7, k vec..2vec), (n 8-15, k 0..vec), (n 8-15, k vec..2vec) →
// b0, b1 of tile 2nj, b0, b1 of tile 2nj + 1. MN-major: the same with .trans, vec = 8.
GK_SM80_LAYOUT_FN int b_ldsm_offset(bool k_major, int ld, int vec, int mma_k, int lane, int wn,
                                    int nj, int kk) {
  const int n = wn * kWarpN + nj * 16;
  return k_major ? (n + lane % 8 + (lane / 16) * 8) * ld + kk * mma_k + ((lane / 8) % 2) * vec
                 : (kk * mma_k + lane % 8 + ((lane / 8) % 2) * 8) * ld + n + (lane / 16) * 8;
}

// tf32, M-contiguous A (MN-major tile, paired rows): the 64-bit load of `lane` that fills
// a(2·kh), a(2·kh + 1) of m16 tile mi in k step kk (k t + 4·kh, rows g and g + 8).
GK_SM80_LAYOUT_FN int tf32_a_mn_offset(int ld, int lane, int wm, int mi, int kk, int kh) {
  return (kk * 8 + lane % 4 + 4 * kh) * ld + wm * kWarpM + warp_row(true, mi, 0, lane / 4);
}

// tf32, N-contiguous B (MN-major tile): the 32-bit load of `lane` for b(kh) of n8 tile ni in
// k step kk (k t + 4·kh, column g).
GK_SM80_LAYOUT_FN int tf32_b_mn_offset(int ld, int lane, int wn, int ni, int kk, int kh) {
  return (kk * 8 + lane % 4 + 4 * kh) * ld + wn * kWarpN + ni * 8 + lane / 4;
}

}  // namespace gk::matmul::sm80_layout

#undef GK_SM80_LAYOUT_FN

#endif  // GPUKIT_KERNELS_MATMUL_SM80_MMA_LAYOUT_H_
