// Tuning constants of the reductions family, one table, with the measurement behind
// each. The kernels are memory bound; the constants set bytes in flight per SM and how
// rows are split across threads. They hold for SM 80 to 90; SM 90 (H100 SXM, 132 SMs)
// is where they were measured.
#pragma once

namespace gk::kernels::reductions::tuning {

// Elementwise, general kernel (strides, broadcasts, rows): threads per block and 16-byte
// vectors per thread per tile. 4 vectors in flight per operand per thread keeps ≥ 32 KB in
// flight per SM at 8 blocks/SM.
inline constexpr int kEwThreads = 256;
inline constexpr int kEwVectorsPerThread = 4;

// Elementwise, contiguous kernel: one 16-byte vector per operand per thread, one tile per
// block; threads per block by op kind, H100, 64 Mi elements, against PyTorch in one process:
// - one input (unary ops, casts): 128 threads, 16 blocks per SM, PyTorch's layout. silu bf16
//   0.999–1.000x at 128 and 0.973x at 768; cast f32->bf16 1.006x at 128, 0.925x at 768.
// - two inputs (binary and gated ops): 768 threads, 2 blocks (48 warps) per SM. add bf16 at
//   128/256/384/512/640/768/1024 threads: 0.997/0.997/0.997/0.998/0.999/1.002/1.001x; add
//   f32 1.006x at 128, 1.012x at 768. PyTorch's add kernel has 34 registers, so 12 blocks of
//   128 (also 48 warps); a copy of it held to 32 registers (16 blocks) lost 0.25%.
// Capping residency with shared memory instead cost 0.6%, a persistent grid 4%.
inline constexpr int kEwContiguousThreads = 128;
inline constexpr int kEwContiguousBinaryThreads = 768;
// __launch_bounds__ min blocks = kEwResidentThreads / threads: fits every SM built for (sm86/
// sm89 hold 1536 threads) and caps registers at 42.
inline constexpr int kEwResidentThreads = 1536;

// Reductions: threads per block for block-per-row and column kernels.
inline constexpr int kReduceThreads = 256;
// Rows of at most this many elements are reduced by one warp each.
inline constexpr int kWarpRowMax = 1024;
// A split column reduction brings its blocks (column tiles × chunks of the reduced range)
// just under a multiple of this: 20 × 132 is a whole number of waves on an H100 both at 4
// blocks of 256 per SM (the lean vector kernels of f32 and bf16 sums, ≤ 64 registers) and
// at 5 (f16 sums and f32 max/min, 48). Against 12 × 132 (whole at 3 and 4 per SM, the
// residencies before ColLeanParams), it read 1.065 → 1.11× torch for a bf16 sum over
// axis 0 of [4096, 16384], 1.10 → 1.11× for f32 [16384, 4096], 1.17 → 1.22× for max f32
// [64, 4096, 64] over axis 1.
// A constant, not read from the device, so the split (and so the result bits) depends only
// on the shape.
inline constexpr int kColWaveBlocks = 2640;
// Each thread of a split column reduction reads at least this many reduced rows: a block's
// partials (one float per column) are then ≤ 1/64 of what it reads in bf16, 1/128 in f32.
inline constexpr int kColMinRowsPerThread = 16;
// Split row reductions (a sum over all elements, or over fewer than kSplitRowsBelow long rows):
// each row is cut into chunks so that rows × chunks ≈ kRowSplitBlocks. Both are multiples of 4 ×
// 132 (the split kernels hold 4 blocks of 256 per SM: reduce.cu run_plan) and 3 × 132 (the 16-bit
// RowParams kernel's residency), so every wave on an H100 is full. With 528 chunks a bf16 split ran
// as 396 blocks and then a tail of 132 at one block per SM: sum all bf16 [64 Mi] read 82% of copy.
// Finer chunks shorten the last wave's tail; for sum all bf16 [64 Mi] / f32 [256 Mi] against torch
// in one process: 1584 blocks 0.995 / 0.998×, 3168 1.012 / 1.004×, 4752 1.032–1.039 / 1.007×, 6336
// 0.887 / 1.012× (bf16 chunks of 11 Ki elements: under two 8 Ki-element steps per block).
// Constants, as above: the split depends only on the shape.
inline constexpr int kSplitRowsBelow = 1584;
inline constexpr int kRowSplitBlocks = 4752;
// A split never makes chunks smaller than this many elements (2 tiles of 256×16B
// vectors for f32), so each block streams long enough to hide its start-up. 64 KiB per
// block instead (bf16 32768, f32 16384) gained 3–5% on the H200 but nothing on the H100:
// bf16 sum all [16 Mi] 1.18 → 1.15× torch, [64 Mi] 1.04 → 1.05×, f32 [16 Mi] 1.10 →
// 1.08×, [64 Mi] 1.03 → 1.04×.
inline constexpr long long kMinChunk = 8192;
// At most this many partials per output.
inline constexpr int kMaxPartials = 8192;
// The finalize pass reads a row's partials with one warp up to this many, else with a
// block of kReduceThreads (a sum over all elements then reads at most 19 per thread in
// sequence, where one warp read 149).
inline constexpr int kWarpFinalizeMax = 128;

// Softmax and norms: rows longer than the largest register-cached configuration
// (32768 elements) go to the two-pass chunked path with chunks of this many elements.
// Norms without a residual (vector layout) keep the row slice packed as T and cap
// registers with __launch_bounds__ min-blocks (norm.cu packed_min_blocks): for bf16
// [16384, 4096] that is 64 registers and 8 blocks of 128 per SM (64 KB in flight) instead
// of 114 and 4 (32 KB), with no spills (ptxas -v); docs/kernels/reductions.md has the
// speeds.
inline constexpr long long kRowChunk = 16384;

}  // namespace gk::kernels::reductions::tuning
