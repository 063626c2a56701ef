// softmax / log_softmax.
//
// CACHED (axis stride 1 in x and out, K ≤ 32768): one pass over memory.
//   for row in grid-stride(rows):                 // kTpr threads per row (rows.cuh)
//     v[kE] = x[row] in registers (16-byte loads when K % V == 0), pad -inf
//     m = group max(v)                            // NaN-propagating
//     s = group sum(exp(v - m))                   // fixed butterfly + warp order
//     out[row] = exp(v - m) / s   or   v - m - log(s)
// CHUNKED (axis stride 1, K > 32768): chunks of kRowChunk = 512 threads × 32.
//   STATS: block per (row, chunk): chunk in registers, (m_c, s_c) → workspace
//   WRITE: block per (row, chunk): every thread folds the row's (m_c, s_c) in chunk
//          order, re-reads its chunk and writes. 2 reads + 1 write of x.
// STAGED (axis stride ≠ 1 in x or out): the operand is copied with the axis last into a
//   packed workspace (the elementwise copy, tiled through shared memory where another dim
//   is contiguous), the row path runs there, and out is copied back. A thread per row
//   over the strided axis ran at 39 GB/s on f32 [4096, 4096] over axis 0 (H100):
//   4096 threads in flight.
#include <cmath>

#include "device.cuh"
#include "elementwise.cuh"
#include "rows.cuh"
#include "softmax.cuh"
#include "tuning.cuh"

namespace gk::kernels::reductions {
namespace {

using rows::block_threads;
using rows::RowOperands;

struct SoftmaxParams {
  const void* x;
  void* out;
  void* partials;
  RowOperands ops;  // operand 0 = x, 1 = out
  int64_t rows, k, chunks;
  int log;
};

// The cached kernel's parameters where the rows' outer dims merge into one (x's and out's
// rows each a fixed stride apart, the common case); SoftmaxParams is over kLeanParamBytes.
struct SoftmaxRowParams {
  const void* x;
  void* out;
  int64_t rows, k;
  int64_t row_stride[2];  // 0 x, 1 out
  int log;
};

static_assert(sizeof(SoftmaxRowParams) <= kLeanParamBytes, "see kLeanParamBytes");

// Offset of row `row` of operand `op` (0 x, 1 out), in elements.
__device__ __forceinline__ int64_t row_offset(const SoftmaxParams& p, int64_t row, int op) {
  return offset_of(row, p.ops.outer, p.ops.stride[op]);
}

// The row goes through an opaque move so that ptxas forms both offsets anew in each pass
// of the row loop: left to itself it kept running x and out pointers live across the pass,
// and f32 rows of ≤ 1024 spilled 24 bytes under the 80-register cap (ptxas -v, sm_90a).
__device__ __forceinline__ int64_t row_offset(const SoftmaxRowParams& p, int64_t row, int op) {
  int64_t r;
  asm volatile("mov.b64 %0, %1;" : "=l"(r) : "l"(row));
  return r * p.row_stride[op];
}

// e^x of an element: 16-bit outputs take the bare MUFU exponential (exp_ftz), ~10
// instructions fewer per element than expf; f32 keeps expf's full precision.
template <typename T>
__device__ __forceinline__ float element_exp(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    return exp_ftz(x);
  }
}

constexpr int kChunkTpr = 512;
constexpr int kChunkE = 32;
static_assert(int64_t{kChunkTpr} * kChunkE == tuning::kRowChunk, "chunk = one cached block");

// Blocks per SM to ask for: 768 threads, so ≤ 80 registers (ptxas: no spills) and 24
// warps of rows in flight. Left to itself ptxas takes 96-128 registers (16-20 warps),
// which costs f32 [32768, 1000] about a tenth of its bandwidth, and the count moves with
// unrelated changes elsewhere in the kernel.
template <int kTpr>
constexpr int softmax_min_blocks() {
  return block_threads<kTpr>() >= 768 ? 1 : 768 / block_threads<kTpr>();
}

// Params: SoftmaxRowParams, or SoftmaxParams where the outer dims do not merge.
template <typename T, int kTpr, int kE, bool kVec, typename Params>
__global__ void __launch_bounds__(block_threads<kTpr>(), softmax_min_blocks<kTpr>())
    softmax_cached_kernel(Params p) {
  constexpr int kGroups = block_threads<kTpr>() / kTpr;
  __shared__ float scratch[2][32];
  BlockReducer block(scratch);
  const int t = threadIdx.x % kTpr;
  for (int64_t row0 = int64_t{blockIdx.x} * kGroups; row0 < p.rows;
       row0 += int64_t{gridDim.x} * kGroups) {
    const int64_t row = row0 + threadIdx.x / kTpr;
    if (kTpr == 32 && row >= p.rows) break;  // whole warps leave; blocks never split
    const T* x = static_cast<const T*>(p.x) + row_offset(p, row, 0);
    T* out = static_cast<T*>(p.out) + row_offset(p, row, 1);
    float v[kE];
    rows::load_row<T, kTpr, kE, kVec>(x, p.k, t, -INFINITY, v);
    float m = v[0];
#pragma unroll
    for (int s = 1; s < kE; ++s) m = nan_max(m, v[s]);
    m = rows::group_reduce<kTpr>(m, MaxOp{}, block);
    // Slots past the row hold -inf, so they add exp(-inf) = 0 without a bounds check,
    // except when m is -inf, +inf or NaN: then a real slot is NaN and so is the sum.
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kE; ++s) {
      v[s] = v[s] - m;
      const float e = element_exp<T>(v[s]);
      sum += e;
      if (!p.log) v[s] = e;
    }
    sum = rows::group_reduce<kTpr>(sum, AddOp{}, block);
    if (p.log) {
      const float ls = logf(sum);
#pragma unroll
      for (int s = 0; s < kE; ++s) v[s] -= ls;
    } else {
      const float inv = 1.0f / sum;
#pragma unroll
      for (int s = 0; s < kE; ++s) v[s] *= inv;
    }
    rows::store_row<T, kTpr, kE, kVec>(out, p.k, t, v);
  }
}

// (m, s) of one chunk into partials[(row * chunks + c) * 2].
template <typename T, bool kVec>
__global__ void __launch_bounds__(kChunkTpr) softmax_chunk_stats_kernel(SoftmaxParams p) {
  __shared__ float scratch[2][32];
  BlockReducer block(scratch);
  const int t = threadIdx.x;
  for (int64_t item = blockIdx.x; item < p.rows * p.chunks; item += gridDim.x) {
    const int64_t row = item / p.chunks;
    const int64_t c = item - row * p.chunks;
    const int64_t begin = c * tuning::kRowChunk;
    const int64_t len = p.k - begin < tuning::kRowChunk ? p.k - begin : tuning::kRowChunk;
    const T* x = static_cast<const T*>(p.x) + offset_of(row, p.ops.outer, p.ops.stride[0]) + begin;
    float v[kChunkE];
    rows::load_row<T, kChunkTpr, kChunkE, kVec>(x, len, t, -INFINITY, v);
    float m = v[0];
#pragma unroll
    for (int s = 1; s < kChunkE; ++s) m = nan_max(m, v[s]);
    m = block.all_reduce(m, MaxOp{});
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kChunkE; ++s)
      if (rows::slot_index<T, kChunkTpr, kVec>(s, t) < len) sum += element_exp<T>(v[s] - m);
    sum = block.all_reduce(sum, AddOp{});
    if (t == 0) {
      float* part = static_cast<float*>(p.partials) + item * 2;
      part[0] = m;
      part[1] = sum;
    }
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kChunkTpr) softmax_chunk_write_kernel(SoftmaxParams p) {
  const int t = threadIdx.x;
  for (int64_t item = blockIdx.x; item < p.rows * p.chunks; item += gridDim.x) {
    const int64_t row = item / p.chunks;
    const int64_t c = item - row * p.chunks;
    const float* part = static_cast<const float*>(p.partials) + row * p.chunks * 2;
    float m = -INFINITY;
    for (int64_t i = 0; i < p.chunks; ++i) m = nan_max(m, part[2 * i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < p.chunks; ++i)
      if (part[2 * i] != -INFINITY) sum += part[2 * i + 1] * expf(part[2 * i] - m);
    const int64_t begin = c * tuning::kRowChunk;
    const int64_t len = p.k - begin < tuning::kRowChunk ? p.k - begin : tuning::kRowChunk;
    const T* x = static_cast<const T*>(p.x) + offset_of(row, p.ops.outer, p.ops.stride[0]) + begin;
    T* out = static_cast<T*>(p.out) + offset_of(row, p.ops.outer, p.ops.stride[1]) + begin;
    float v[kChunkE];
    rows::load_row<T, kChunkTpr, kChunkE, kVec>(x, len, t, -INFINITY, v);
    const float ls = logf(sum), inv = 1.0f / sum;
#pragma unroll
    for (int s = 0; s < kChunkE; ++s) v[s] = p.log ? v[s] - m - ls : element_exp<T>(v[s] - m) * inv;
    rows::store_row<T, kChunkTpr, kChunkE, kVec>(out, len, t, v);
  }
}

template <typename T, int kTpr, int kE, bool kVec>
void launch_cached(const SoftmaxParams& p, unsigned grid, cudaStream_t stream) {
  constexpr int kThreads = block_threads<kTpr>();
  if (p.ops.outer.n > 1) {
    softmax_cached_kernel<T, kTpr, kE, kVec, SoftmaxParams><<<grid, kThreads, 0, stream>>>(p);
    return;
  }
  SoftmaxRowParams r{p.x, p.out, p.rows, p.k, {}, p.log};
  for (int i = 0; i < 2; ++i) r.row_stride[i] = p.ops.outer.n == 1 ? p.ops.stride[i][0] : 0;
  softmax_cached_kernel<T, kTpr, kE, kVec, SoftmaxRowParams><<<grid, kThreads, 0, stream>>>(r);
}

unsigned capped_grid(int64_t blocks) {
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}

bool use_rows_path(const TensorRef& x, int axis, const TensorRef& out) {
  return x.shape[axis] == 1 || (x.strides[axis] == 1 && out.strides[axis] == 1);
}

// Scratch of the row path: chunk statistics for rows longer than the cached limit.
size_t rows_workspace_bytes(const TensorRef& x, int axis) {
  const int64_t k = x.shape[axis];
  if (k <= rows::kMaxCachedRow) return 0;
  return static_cast<size_t>(x.numel() / k * ceil_div(k, tuning::kRowChunk) * 2) * sizeof(float);
}

// The STAGED path's operands (axis last) and workspace layout: [x copy][out copy][row
// scratch], each present only where needed. The cached kernel reads a whole row before
// writing it, so with both copies needed and rows within the cached limit, out's copy is
// x's (in place).
struct Staging {
  TensorRef x, out;  // what the row path reads and writes
  bool copy_x = false, copy_out = false;
  size_t rows_offset = 0, bytes = 0;
};

Staging make_staging(const TensorRef& x, int axis, const TensorRef& out, char* ws) {
  Staging s;
  s.x = axis_last(x, axis);
  s.out = axis_last(out, axis);
  const int last = x.ndim - 1;
  s.copy_x = s.x.strides[last] != 1;
  s.copy_out = s.out.strides[last] != 1;
  if (s.copy_x) {
    s.x = packed_like(s.x, ws);
    s.bytes += packed_bytes(s.x);
  }
  if (s.copy_out) {
    if (s.copy_x && x.shape[axis] <= rows::kMaxCachedRow) {
      s.out = packed_like(s.out, s.x.data);
    } else {
      s.out = packed_like(s.out, ws ? ws + s.bytes : nullptr);
      s.bytes += packed_bytes(s.out);
    }
  }
  s.rows_offset = s.bytes;
  s.bytes += rows_workspace_bytes(x, axis);
  return s;
}

// The row path: x and out with stride 1 along `axis` (or a row of one).
template <typename T>
cudaError_t run_rows(const TensorRef& x, int axis, bool log, const TensorRef& out, void* ws,
                     cudaStream_t stream) {
  SoftmaxParams p{};
  p.x = x.data;
  p.out = out.data;
  p.partials = ws;
  p.k = x.shape[axis];
  p.log = log ? 1 : 0;
  const TensorRef* ts[2] = {&x, &out};
  p.ops = rows::make_row_operands(ts, 2, axis);
  p.rows = 1;
  for (int i = 0; i < p.ops.outer.n; ++i) p.rows *= p.ops.outer.size[i];
  constexpr int kV = Vec16<T>::kN;
  const bool vec = p.k % kV == 0 && rows::rows_aligned16(p.ops, ts, 2);
  if (p.k > rows::kMaxCachedRow) {
    p.chunks = ceil_div(p.k, tuning::kRowChunk);
    const unsigned grid = capped_grid(p.rows * p.chunks);
    if (vec) {
      softmax_chunk_stats_kernel<T, true><<<grid, kChunkTpr, 0, stream>>>(p);
      softmax_chunk_write_kernel<T, true><<<grid, kChunkTpr, 0, stream>>>(p);
    } else {
      softmax_chunk_stats_kernel<T, false><<<grid, kChunkTpr, 0, stream>>>(p);
      softmax_chunk_write_kernel<T, false><<<grid, kChunkTpr, 0, stream>>>(p);
    }
    return cudaGetLastError();
  }
  return rows::with_row_config(p.k, [&](auto tpr, auto e) {
    constexpr int kTpr = decltype(tpr)::value;
    constexpr int kE = decltype(e)::value;
    constexpr int kThreads = block_threads<kTpr>();
    const unsigned grid = capped_grid(ceil_div(p.rows, kThreads / kTpr));
    if (vec) {
      launch_cached<T, kTpr, kE, true>(p, grid, stream);
    } else {
      launch_cached<T, kTpr, kE, false>(p, grid, stream);
    }
    return cudaGetLastError();
  });
}

template <typename T>
cudaError_t run(const TensorRef& x, int axis, bool log, const TensorRef& out, void* ws,
                cudaStream_t stream) {
  if (x.numel() == 0) return cudaSuccess;
  if (use_rows_path(x, axis, out)) return run_rows<T>(x, axis, log, out, ws, stream);
  const Staging s = make_staging(x, axis, out, static_cast<char*>(ws));
  const int last = x.ndim - 1;
  cudaError_t err = cudaSuccess;
  if (s.copy_x) err = launch_cast(axis_last(x, axis), s.x, stream);
  if (err == cudaSuccess)
    err = run_rows<T>(s.x, last, log, s.out, static_cast<char*>(ws) + s.rows_offset, stream);
  if (err == cudaSuccess && s.copy_out) err = launch_cast(s.out, axis_last(out, axis), stream);
  return err;
}

}  // namespace

bool can_implement_softmax(const TensorRef& x, int axis, const TensorRef& out, std::string* why) {
  if (!is_floating(x.dtype) || out.dtype != x.dtype) {
    if (why) *why = "x and out must share a dtype among f32, f16, bf16";
    return false;
  }
  if (x.ndim > kMaxDims || axis < 0 || axis >= (x.ndim == 0 ? 1 : x.ndim)) {
    if (why) *why = "axis out of range or more than 8 dims";
    return false;
  }
  return true;
}

size_t softmax_workspace_bytes(const TensorRef& x, int axis, const TensorRef& out) {
  if (x.ndim == 0 || x.numel() == 0) return 0;
  if (use_rows_path(x, axis, out)) return rows_workspace_bytes(x, axis);
  return make_staging(x, axis, out, nullptr).bytes;
}

cudaError_t launch_softmax(const TensorRef& x, int axis, bool log, const TensorRef& out,
                           void* workspace, cudaStream_t stream) {
  if (x.ndim == 0) {  // a scalar is a row of one
    TensorRef x1 = x, o1 = out;
    x1.ndim = o1.ndim = 1;
    x1.shape[0] = o1.shape[0] = 1;
    x1.strides[0] = o1.strides[0] = 1;
    return launch_softmax(x1, 0, log, o1, workspace, stream);
  }
  if (softmax_workspace_bytes(x, axis, out) > 0 && workspace == nullptr)
    return cudaErrorInvalidValue;
  switch (x.dtype) {
    case DType::f32:
      return run<float>(x, axis, log, out, workspace, stream);
    case DType::f16:
      return run<__half>(x, axis, log, out, workspace, stream);
    case DType::bf16:
      return run<__nv_bfloat16>(x, axis, log, out, workspace, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace gk::kernels::reductions
