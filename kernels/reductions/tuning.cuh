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

// Elementwise, contiguous kernel: 128 threads, one 16-byte vector per operand per thread.
// Min blocks 12 caps registers at 42 and is valid on every SM built for (sm86/sm89 hold
// 1536 threads, so 16 would be ignored there with a ptxas warning); the kernels take
// ≤ 32 registers (ptxas -v, sm_90a), so an H100 still runs 16 blocks per SM. H100, 2026-11-22 (perf/results/h100/
// 2026-11-22_ew_probe/, median of 30 interleaved rounds, % of same-run memcpy): against
// the earlier 256 threads × 4 vectors (× 2 for two 16-bit inputs), at 64 Mi elements add
// bf16 102.6 vs 101.9, add f32 101.7 vs 100.7, silu bf16 100.0 vs 99.9, cast f32→bf16
// 102.4 vs 101.5; at 16 Mi 105.9–107.7 vs 100.7–100.8 for add, 100.7 vs 99.1 silu, 104.9
// vs 98.4 cast. It was at or above the PyTorch-style kernel (V6) in all eight rows.
inline constexpr int kEwContiguousThreads = 128;
inline constexpr int kEwContiguousMinBlocks = 12;

// Reductions: threads per block for block-per-row and column kernels.
inline constexpr int kReduceThreads = 256;
// Rows of at most this many elements are reduced by one warp each.
inline constexpr int kWarpRowMax = 1024;
// Blocks wanted in flight for a split column reduction: 4 per SM on a 132-SM H100. The
// value is a constant, not read from the device, so the split (and so the result bits)
// depends only on the shape.
inline constexpr int kTargetBlocks = 528;
// Split row reductions (a sum over all elements, or over fewer than kSplitRowsBelow long
// rows): each row is cut into chunks so that rows × chunks ≈ kRowSplitBlocks. Both are
// multiples of 4 × 132 (f32: 4 blocks of 256 per SM) and 3 × 132 (16-bit:
// reduce_row_kernel bf16 uses 76 registers, so 3 blocks per SM), so every wave on an H100
// is full. With 528 chunks a bf16 split ran as 396 blocks and then a tail of 132 at one
// block per SM: sum all bf16 [64 Mi] read 82% of copy (perf/results/h100/
// 2026-11-25_reductions/). Finer chunks shorten the last wave's tail; for sum all bf16
// [64 Mi] / f32 [256 Mi] against torch in one process (perf/results/h100/
// 2026-11-25_session9/reduce_split/): 1584 blocks 0.995 / 0.998×, 3168 1.012 / 1.004×,
// 4752 1.032–1.039 / 1.007×, 6336 0.887 / 1.012× (bf16 chunks of 11 Ki elements: under
// two 8 Ki-element steps per block). Constants, as above: the split depends only on the
// shape.
inline constexpr int kSplitRowsBelow = 1584;
inline constexpr int kRowSplitBlocks = 4752;
// A split never makes chunks smaller than this many elements (2 tiles of 256×16B
// vectors for f32), so each block streams long enough to hide its start-up.
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
// registers with __launch_bounds__ min-blocks (norm.cu packed_min_blocks): bf16
// [16384, 4096] goes from 114 registers / 4 blocks of 128 / 32 KB in flight per SM to
// 64 / 8 / 64 KB (ptxas -v, no spills). H100: layernorm 70% of copy and rmsnorm 73%
// before (2026-11-22), 98% and 100% with the packed kernel (session 10 harness).
inline constexpr long long kRowChunk = 16384;

}  // namespace gk::kernels::reductions::tuning
