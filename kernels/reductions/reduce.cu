// Whole on purpose (over 600 lines): one op family (STYLE.md); the row, column and finalize
// kernels share the host-side dim merging that picks among them.
// Reductions over any set of axes.
//
// Host: split x's dims into kept (M outputs) and reduced (K elements each), drop
// size-1 dims, merge dims contiguous in x (and, for kept dims, in out). Then:
//
// ROW, the reduced block is innermost and contiguous (includes "all elements"):
//   for (row, chunk) in grid-stride(M * chunks):   // a warp (K ≤ 1024) or a block
//     base = offset_of(row, kept dims)
//     for i in chunk, step tpr*V*4:                // 4 × 16-byte loads in flight
//       acc = combine(acc, x[base + i + lane*V .. +V])   // fixed per-thread order
//     acc = fixed xor-butterfly over the warp, then warps in order
//     chunks == 1 ? out[row] = finalize(acc) : partials[row][chunk] = acc
//   FINALIZE (chunks > 1): one warp per row (a block where chunks > 128) combines
//   partials[row][0..chunks) in a fixed thread-strided order and the fixed trees; a
//   programmatic dependent launch on SM 90+, so its launch overlaps the partials kernel.
// COL, the innermost x dim is kept (reduce over outer axes):
//   block (32 × 8): x → V adjacent output columns per thread (16-byte loads across
//   the warp), y → every 8th reduced index; grid = (column tiles × outer kept,
//   chunks of the reduced range). The 8 y-partials meet in shared memory and are
//   combined in y order; chunks > 1 writes partials[col][chunk] for FINALIZE.
// GENERIC (neither): ROW with the reduced offset decomposed per element.
//
// Determinism: the chunking, the per-thread order and both trees depend only on the
// shape, never on timing or the device; no atomics are used.
#include <atomic>
#include <cmath>
#include <cstdint>

#include "device.cuh"
#include "reduce.cuh"
#include "tuning.cuh"

namespace gk::kernels::reductions {
namespace {

using tuning::kMaxPartials;
using tuning::kMinChunk;
using tuning::kReduceThreads;
using tuning::kRowSplitBlocks;
using tuning::kSplitRowsBelow;
using tuning::kWarpFinalizeMax;
using tuning::kWarpRowMax;

struct ArgAcc {
  float v;
  int64_t i;
};

template <ReduceOp kOp>
struct Red {
  static constexpr bool kArg = kOp == ReduceOp::argmax || kOp == ReduceOp::argmin;
  using Acc = std::conditional_t<kArg, ArgAcc, float>;

  __device__ __forceinline__ static Acc identity() {
    if constexpr (kOp == ReduceOp::sum || kOp == ReduceOp::mean) return 0.0f;
    if constexpr (kOp == ReduceOp::prod) return 1.0f;
    if constexpr (kOp == ReduceOp::max) return -INFINITY;
    if constexpr (kOp == ReduceOp::min) return INFINITY;
    if constexpr (kOp == ReduceOp::argmax) return ArgAcc{-INFINITY, INT64_MAX};
    if constexpr (kOp == ReduceOp::argmin) return ArgAcc{INFINITY, INT64_MAX};
  }
  __device__ __forceinline__ static Acc from(float v, int64_t i) {
    if constexpr (kArg) {
      return ArgAcc{v, i};
    } else {
      return v;
    }
  }
  // b replaces a when b is more extreme, or equally extreme with a lower index; a NaN
  // is the most extreme value. The winner is unique, so any tree order gives it.
  __device__ __forceinline__ static Acc combine(Acc a, Acc b) {
    if constexpr (kOp == ReduceOp::sum || kOp == ReduceOp::mean) return a + b;
    if constexpr (kOp == ReduceOp::prod) return a * b;
    if constexpr (kOp == ReduceOp::max) return nan_max(a, b);
    if constexpr (kOp == ReduceOp::min) return nan_min(a, b);
    if constexpr (kArg) {
      const bool an = a.v != a.v, bn = b.v != b.v;
      bool take;
      if (an || bn) {
        take = (bn && !an) || (an && bn && b.i < a.i);
      } else if (kOp == ReduceOp::argmax) {
        take = b.v > a.v || (b.v == a.v && b.i < a.i);
      } else {
        take = b.v < a.v || (b.v == a.v && b.i < a.i);
      }
      return take ? b : a;
    }
  }
  __device__ __forceinline__ static Acc shfl_xor(Acc a, int off) {
    if constexpr (kArg) {
      return ArgAcc{__shfl_xor_sync(0xffffffffu, a.v, off),
                    static_cast<int64_t>(__shfl_xor_sync(
                        0xffffffffu, static_cast<long long>(a.i), off))};
    } else {
      return __shfl_xor_sync(0xffffffffu, a, off);
    }
  }
  __device__ __forceinline__ static Acc warp_reduce(Acc a) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) a = combine(a, shfl_xor(a, off));
    return a;
  }
  template <typename T>
  __device__ __forceinline__ static void write(void* out, int64_t off, Acc a, int64_t k) {
    if constexpr (kArg) {
      static_cast<int64_t*>(out)[off] = a.i;
    } else if constexpr (kOp == ReduceOp::mean) {
      static_cast<T*>(out)[off] = from_f32<T>(static_cast<float>(
          static_cast<double>(a) / static_cast<double>(k)));
    } else {
      static_cast<T*>(out)[off] = from_f32<T>(a);
    }
  }
};

// Combines acc over a group of kTpr threads (a warp, or the whole block): the fixed
// butterfly, then the warps in order. Every thread of the group gets the result.
template <typename R, int kTpr>
__device__ __forceinline__ typename R::Acc group_combine(typename R::Acc acc,
                                                         typename R::Acc* scratch) {
  acc = R::warp_reduce(acc);
  if constexpr (kTpr > 32) {
    __syncthreads();
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = acc;
    __syncthreads();
    acc = scratch[0];
    for (int w = 1; w < kTpr / 32; ++w) acc = R::combine(acc, scratch[w]);
  }
  return acc;
}

struct Plan {
  enum Kind { kRow, kCol, kGeneric } kind = kRow;
  bool vector = false;
  int tpr = 32;          // ROW: threads per row
  Dims kept;             // innermost first
  int64_t kept_x[kMaxDims] = {};
  int64_t kept_out[kMaxDims] = {};
  Dims red;              // innermost first
  int64_t red_x[kMaxDims] = {};
  int64_t m = 1, k = 1;
  int64_t chunks = 1, chunk_len = 0;
  int64_t col_tiles = 0; // COL: tiles of 32*V columns over the innermost kept dim
};

struct RowParams {
  const void* x;
  void* out;
  void* partials;
  Dims kept;
  int64_t kept_x[kMaxDims];
  int64_t kept_out[kMaxDims];
  Dims red;
  int64_t red_x[kMaxDims];
  int64_t m, k, chunks, chunk_len;
};

// RowParams where the kept dims merge into one (x's rows and the outputs each a fixed
// stride apart), the reduced range is contiguous and not split: reductions of rows over
// the last axis. RowParams is over kLeanParamBytes.
struct RowLeanParams {
  const void* x;
  void* out;
  void* partials;
  int64_t row_x, row_out;  // strides between consecutive rows of x and outputs
  int64_t m, k, chunks, chunk_len;
};

static_assert(sizeof(RowLeanParams) <= kLeanParamBytes, "see kLeanParamBytes");

// Offsets of row `row` in x and of its output, in elements.
__device__ __forceinline__ int64_t x_row_offset(const RowParams& p, int64_t row) {
  return offset_of(row, p.kept, p.kept_x);
}
__device__ __forceinline__ int64_t out_offset(const RowParams& p, int64_t row) {
  return offset_of(row, p.kept, p.kept_out);
}
__device__ __forceinline__ int64_t x_row_offset(const RowLeanParams& p, int64_t row) {
  return row * p.row_x;
}
__device__ __forceinline__ int64_t out_offset(const RowLeanParams& p, int64_t row) {
  return row * p.row_out;
}

struct ColParams {
  const void* x;
  void* out;
  void* partials;
  Dims kept;              // for output offsets, innermost first
  int64_t kept_out[kMaxDims];
  Dims outer;             // kept dims without the innermost one
  int64_t outer_x[kMaxDims];
  Dims red;
  int64_t red_x[kMaxDims];
  int64_t j;              // innermost kept dim size (x stride 1)
  int64_t m, k, chunks, chunk_len, col_tiles;
};

// ColParams where one dim is reduced, the kept dims past the innermost merge into one (outer
// items a fixed stride apart in x) and the outputs lie a fixed stride apart: sums over axis
// 0 of a matrix, or over the middle axis of [A, K, B]. Besides the smaller launch, the
// reduced row's offset is one multiply: with ColParams's run-time choice between that and
// offset_of, the bf16 vector kernel took 78 registers (3 blocks per SM) instead of 62.
struct ColLeanParams {
  const void* x;
  void* out;
  void* partials;
  int64_t outer_x;  // stride between outer items of x
  int64_t red_x;    // stride between reduced rows of x
  int64_t out_x;    // stride between consecutive outputs
  int64_t j, m, k, chunks, chunk_len, col_tiles;
};

static_assert(sizeof(ColLeanParams) <= kLeanParamBytes, "see kLeanParamBytes");

// Offsets in elements: of outer item `i` and reduced row `r` in x, and of output `o`.
__device__ __forceinline__ int64_t outer_offset(const ColParams& p, int64_t i) {
  return offset_of(i, p.outer, p.outer_x);
}
__device__ __forceinline__ int64_t red_offset(const ColParams& p, int64_t r) {
  if (p.red.n == 1) return r * p.red_x[0];
  return p.k <= UINT32_MAX ? offset_of_u32(static_cast<uint32_t>(r), p.red, p.red_x)
                           : offset_of(r, p.red, p.red_x);
}
__device__ __forceinline__ int64_t out_offset(const ColParams& p, int64_t o) {
  return offset_of(o, p.kept, p.kept_out);
}
__device__ __forceinline__ int64_t outer_offset(const ColLeanParams& p, int64_t i) {
  return i * p.outer_x;
}
__device__ __forceinline__ int64_t red_offset(const ColLeanParams& p, int64_t r) {
  return r * p.red_x;
}
__device__ __forceinline__ int64_t out_offset(const ColLeanParams& p, int64_t o) {
  return o * p.out_x;
}

constexpr int kUnroll = 4;  // independent 16-byte loads per thread per step

// kRowGenericVector: GENERIC with its innermost reduced dim contiguous and a multiple of
// V long (NCHW channel statistics: H·W), so no vector straddles two runs.
enum RowMode { kRowVector = 0, kRowScalar = 1, kRowGeneric = 2, kRowGenericVector = 3 };

// Offset in x of reduced index `i` of a GENERIC row.
__device__ __forceinline__ int64_t red_offset(const RowParams& p, int64_t i) {
  return p.k <= UINT32_MAX ? offset_of_u32(static_cast<uint32_t>(i), p.red, p.red_x)
                           : offset_of(i, p.red, p.red_x);
}

// Params: RowLeanParams, or RowParams (kRowGeneric, or kept dims that do not merge).
template <typename T, ReduceOp kOp, int kTpr, int kMode, typename Params>
__global__ void __launch_bounds__(kReduceThreads) reduce_row_kernel(Params p) {
  using R = Red<kOp>;
  using Acc = typename R::Acc;
  constexpr bool kVector = kMode == kRowVector || kMode == kRowGenericVector;
  constexpr int kV = kVector ? Vec16<T>::kN : 1;
  constexpr int kGroups = kReduceThreads / kTpr;
  __shared__ Acc scratch[kReduceThreads / 32];
  allow_dependent_launch();
  const T* x = static_cast<const T*>(p.x);
  const int t = threadIdx.x % kTpr;
  const int group = threadIdx.x / kTpr;
  const int64_t items = p.m * p.chunks;

  for (int64_t base_item = int64_t{blockIdx.x} * kGroups; base_item < items;
       base_item += int64_t{gridDim.x} * kGroups) {
    const int64_t item = base_item + group;
    Acc acc = R::identity();
    int64_t row = 0, chunk = 0;
    if (item < items) {
      row = item / p.chunks;
      chunk = item - row * p.chunks;
      const int64_t base = x_row_offset(p, row);
      const int64_t begin = chunk * p.chunk_len;
      const int64_t end = begin + p.chunk_len < p.k ? begin + p.chunk_len : p.k;
      constexpr int64_t kStep = int64_t{kTpr} * kV * kUnroll;
      for (int64_t i0 = begin + int64_t{t} * kV; i0 < end; i0 += kStep) {
        if constexpr (kVector) {
          Vec16<T> v[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t i = i0 + int64_t{u} * kTpr * kV;
            if (i < end) {
              int64_t off = i;
              if constexpr (kMode == kRowGenericVector) off = red_offset(p, i);
              v[u] = load_vec_stream(x + base + off);
            }
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t i = i0 + int64_t{u} * kTpr * kV;
            if (i < end) {
#pragma unroll
              for (int e = 0; e < kV; ++e) acc = R::combine(acc, R::from(to_f32(v[u].v[e]), i + e));
            }
          }
        } else {
          float v[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t i = i0 + int64_t{u} * kTpr;
            if (i < end) {
              int64_t off = i;
              if constexpr (kMode == kRowGeneric) off = red_offset(p, i);
              v[u] = to_f32(x[base + off]);
            }
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t i = i0 + int64_t{u} * kTpr;
            if (i < end) acc = R::combine(acc, R::from(v[u], i));
          }
        }
      }
    }
    acc = group_combine<R, kTpr>(acc, scratch);
    if (item < items && t == 0) {
      if (p.chunks == 1) {
        R::template write<T>(p.out, out_offset(p, row), acc, p.k);
      } else {
        static_cast<Acc*>(p.partials)[row * p.chunks + chunk] = acc;
      }
    }
  }
}

constexpr int kColX = 32;
constexpr int kColY = kReduceThreads / kColX;

// Params: ColLeanParams, or ColParams (several reduced dims, outer dims that do not merge,
// or outputs that are not a fixed stride apart).
template <typename T, ReduceOp kOp, bool kVector, typename Params>
__global__ void __launch_bounds__(kReduceThreads) reduce_col_kernel(Params p) {
  using R = Red<kOp>;
  using Acc = typename R::Acc;
  constexpr int kV = kVector ? Vec16<T>::kN : 1;
  __shared__ Acc scratch[kColY][kColX * kV];
  allow_dependent_launch();
  const T* x = static_cast<const T*>(p.x);
  const int tx = threadIdx.x % kColX;
  const int ty = threadIdx.x / kColX;
  const int64_t outer_idx = blockIdx.x / p.col_tiles;
  const int64_t tile = blockIdx.x - outer_idx * p.col_tiles;
  const int64_t j0 = (tile * kColX + tx) * kV;
  const int64_t chunk = blockIdx.y;
  const bool active = j0 < p.j;

  Acc acc[kV];
#pragma unroll
  for (int e = 0; e < kV; ++e) acc[e] = R::identity();
  if (active) {
    const int64_t base = outer_offset(p, outer_idx) + j0;
    const int64_t begin = chunk * p.chunk_len;
    const int64_t end = begin + p.chunk_len < p.k ? begin + p.chunk_len : p.k;
    for (int64_t r0 = begin + ty; r0 < end; r0 += kColY * kUnroll) {
      Vec16<T> vv[kUnroll];
      T vs[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t r = r0 + u * kColY;
        if (r < end) {
          const int64_t off = red_offset(p, r);
          if constexpr (kVector) {
            vv[u] = load_vec_stream(x + base + off);
          } else {
            vs[u] = x[base + off];
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t r = r0 + u * kColY;
        if (r < end) {
#pragma unroll
          for (int e = 0; e < kV; ++e) {
            const float v = kVector ? to_f32(vv[u].v[e]) : to_f32(vs[u]);
            acc[e] = R::combine(acc[e], R::from(v, r));
          }
        }
      }
    }
  }
#pragma unroll
  for (int e = 0; e < kV; ++e) scratch[ty][tx * kV + e] = acc[e];
  __syncthreads();
  if (ty == 0 && active) {
#pragma unroll
    for (int e = 0; e < kV; ++e) {
      Acc a = scratch[0][tx * kV + e];
      for (int y = 1; y < kColY; ++y) a = R::combine(a, scratch[y][tx * kV + e]);
      const int64_t col = j0 + e;
      if (col < p.j) {
        const int64_t o = outer_idx * p.j + col;
        if (p.chunks == 1) {
          R::template write<T>(p.out, out_offset(p, o), a, p.k);
        } else {
          static_cast<Acc*>(p.partials)[o * p.chunks + chunk] = a;
        }
      }
    }
  }
}

// kTpr threads per output: a warp, or the whole block where a row has many partials (a
// sum over all elements has up to 4752, which one warp would read 149 deep).
// Each thread combines partials t, t + kTpr, ... in order, then the fixed trees. With
// chunks == 0 it writes the empty-reduction value.
template <typename T, ReduceOp kOp, int kTpr, typename Params>
__global__ void __launch_bounds__(kReduceThreads) reduce_finalize_kernel(Params p) {
  using R = Red<kOp>;
  using Acc = typename R::Acc;
  constexpr int kGroups = kReduceThreads / kTpr;
  __shared__ Acc scratch[kReduceThreads / 32];
  const int t = threadIdx.x % kTpr;
  const Acc* partials = static_cast<const Acc*>(p.partials);
  wait_for_prior_grid();
  for (int64_t base = int64_t{blockIdx.x} * kGroups; base < p.m;
       base += int64_t{gridDim.x} * kGroups) {
    const int64_t o = base + threadIdx.x / kTpr;
    Acc acc = R::identity();
    if (o < p.m) {
      const Acc* row = partials + o * p.chunks;
      for (int64_t c = t; c < p.chunks; c += kTpr) acc = R::combine(acc, row[c]);
    }
    acc = group_combine<R, kTpr>(acc, scratch);
    if (o < p.m && t == 0) R::template write<T>(p.out, out_offset(p, o), acc, p.k);
  }
}

// ---- host side ---------------------------------------------------------------------

// Whether `kernel`, as loaded for the current device, waits for its prior grid: the device
// is SM 90+ and the code was compiled for it (a build with only SM 80 PTX, JIT-compiled on
// a Hopper, has no wait, so it must not be launched early). Cached per device.
template <typename Kernel>
bool waits_for_prior_grid(Kernel kernel) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int8_t> known[kMaxDevices];  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return false;
  int8_t k = known[dev].load(std::memory_order_relaxed);
  if (k == 0) {
    int major = 0;
    cudaFuncAttributes a{};
    const bool yes =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        major >= 9 && cudaFuncGetAttributes(&a, kernel) == cudaSuccess && a.ptxVersion >= 90;
    k = yes ? 1 : 2;
    known[dev].store(k, std::memory_order_relaxed);
  }
  return k == 1;
}

// Launches the finalize pass after the partials kernel just queued on `stream`, as its
// programmatic dependent where the device allows (see allow_dependent_launch).
template <typename T, ReduceOp kOp, typename Params>
cudaError_t launch_finalize(const Params& rp, cudaStream_t stream) {
  const bool block_per_row = rp.chunks > kWarpFinalizeMax;
  auto kernel = block_per_row ? reduce_finalize_kernel<T, kOp, kReduceThreads, Params>
                              : reduce_finalize_kernel<T, kOp, 32, Params>;
  const int64_t rows_per_block = block_per_row ? 1 : kReduceThreads / 32;
  const int64_t blocks = ceil_div(rp.m, rows_per_block);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20)));
  cfg.blockDim = dim3(kReduceThreads);
  cfg.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (waits_for_prior_grid(kernel)) {
    cfg.attrs = &early;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, kernel, rp);
}

size_t acc_size(ReduceOp op) {
  return (op == ReduceOp::argmax || op == ReduceOp::argmin) ? sizeof(ArgAcc) : sizeof(float);
}

// Chunks of the reduced range for a column reduction of `blocks` column tiles: where the
// tiles alone fill under two kColWaveBlocks, the count that brings tiles × chunks closest
// under one or two of them, as the chunks' minimum length allows; the fewer chunks when
// both fill alike (each chunk adds a partial per column). f32 [16384, 4096] axis 0: 32
// tiles, 82 chunks, 2624 blocks; bf16 [4096, 16384]: 64 tiles, 32 chunks (the most that
// keep kColMinRowsPerThread), 2048 blocks.
int64_t col_chunks(int64_t blocks, int64_t k) {
  constexpr int64_t kWave = tuning::kColWaveBlocks;
  if (blocks >= 2 * kWave) return 1;
  int64_t most = ceil_div(k, int64_t{kColY} * tuning::kColMinRowsPerThread);
  if (most > kMaxPartials) most = kMaxPartials;
  auto fill = [&](int64_t chunks) {
    const int64_t n = chunks * blocks;
    return double(n) / double(ceil_div(n, kWave) * kWave);
  };
  int64_t best = 1;
  for (int64_t waves = 1; waves <= 2; ++waves) {
    int64_t chunks = waves * kWave / blocks;
    if (chunks > most) chunks = most;
    if (chunks >= 1 && fill(chunks) > fill(best) + 0.01) best = chunks;
  }
  return best;
}

// Builds the plan; returns false (with why) when the call cannot be laid out.
bool make_plan(ReduceOp op, const TensorRef& x, uint32_t mask, const TensorRef& out, Plan* plan,
               std::string* why) {
  if (x.ndim > kMaxDims || out.ndim > kMaxDims) {
    if (why) *why = "more than " + std::to_string(kMaxDims) + " dims";
    return false;
  }
  const bool keep = out.ndim == x.ndim;
  // Outermost-first lists, size-1 dims dropped.
  int nk = 0, nr = 0;
  int64_t ks[kMaxDims], kx[kMaxDims], ko[kMaxDims], rs[kMaxDims], rx[kMaxDims];
  int od = 0;
  plan->m = 1;
  plan->k = 1;
  for (int d = 0; d < x.ndim; ++d) {
    const bool reduced = (mask >> d) & 1u;
    int64_t ostride = 0;
    if (keep) {
      ostride = out.strides[d];
    } else if (!reduced) {
      if (od >= out.ndim) {
        if (why) *why = "out has fewer dims than the kept dims of x";
        return false;
      }
      ostride = out.strides[od++];
    }
    if (reduced) {
      plan->k *= x.shape[d];
      if (x.shape[d] == 1) continue;
      if (nr > 0 && rx[nr - 1] == x.strides[d] * x.shape[d]) {
        rs[nr - 1] *= x.shape[d];
        rx[nr - 1] = x.strides[d];
      } else {
        rs[nr] = x.shape[d];
        rx[nr] = x.strides[d];
        ++nr;
      }
    } else {
      plan->m *= x.shape[d];
      if (x.shape[d] == 1) continue;
      if (nk > 0 && kx[nk - 1] == x.strides[d] * x.shape[d] &&
          ko[nk - 1] == ostride * x.shape[d]) {
        ks[nk - 1] *= x.shape[d];
        kx[nk - 1] = x.strides[d];
        ko[nk - 1] = ostride;
      } else {
        ks[nk] = x.shape[d];
        kx[nk] = x.strides[d];
        ko[nk] = ostride;
        ++nk;
      }
    }
  }
  plan->kept.n = nk;
  for (int i = 0; i < nk; ++i) {
    plan->kept.size[i] = ks[nk - 1 - i];
    plan->kept_x[i] = kx[nk - 1 - i];
    plan->kept_out[i] = ko[nk - 1 - i];
  }
  plan->red.n = nr;
  for (int i = 0; i < nr; ++i) {
    plan->red.size[i] = rs[nr - 1 - i];
    plan->red_x[i] = rx[nr - 1 - i];
  }

  const int64_t esize = static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t v = 16 / esize;
  auto all_aligned = [&](const int64_t* strides, int n) {
    for (int i = 0; i < n; ++i)
      if ((strides[i] * esize) % 16 != 0) return false;
    return true;
  };

  if (nr <= 1 && (nr == 0 || plan->red_x[0] == 1)) {
    plan->kind = Plan::kRow;
  } else if (nk >= 1 && plan->kept_x[0] == 1) {
    plan->kind = Plan::kCol;
  } else {
    plan->kind = Plan::kGeneric;
  }

  if (plan->k == 0) {  // empty reduction: only the finalize pass runs
    plan->chunks = 1;
    plan->chunk_len = 0;
    return true;
  }
  if (plan->kind == Plan::kCol) {
    const int64_t j = plan->kept.size[0];
    plan->vector = j % v == 0 && aligned16(x.data) && all_aligned(plan->kept_x + 1, nk - 1) &&
                   all_aligned(plan->red_x, nr);
    const int64_t vw = plan->vector ? v : 1;
    plan->col_tiles = ceil_div(j, kColX * vw);
    const int64_t chunks = col_chunks(plan->col_tiles * (plan->m / j), plan->k);
    plan->chunk_len = ceil_div(plan->k, chunks);
    plan->chunks = ceil_div(plan->k, plan->chunk_len);
    if (plan->chunks > 65535) {
      if (why) *why = "too many reduction chunks";
      return false;
    }
    return true;
  }

  plan->tpr = plan->k <= kWarpRowMax ? 32 : kReduceThreads;
  plan->vector = plan->kind == Plan::kRow && plan->k % v == 0 && aligned16(x.data) &&
                 all_aligned(plan->kept_x, nk);
  if (plan->kind == Plan::kGeneric) {
    plan->vector = nr >= 1 && plan->red_x[0] == 1 && plan->red.size[0] % v == 0 &&
                   aligned16(x.data) && all_aligned(plan->kept_x, nk) &&
                   all_aligned(plan->red_x + 1, nr - 1);
  }
  int64_t chunks = 1;
  if (plan->tpr == kReduceThreads && plan->m < kSplitRowsBelow) {
    chunks = ceil_div(kRowSplitBlocks, plan->m);
    const int64_t max_by_len = ceil_div(plan->k, kMinChunk);
    if (chunks > max_by_len) chunks = max_by_len;
    if (chunks > kMaxPartials) chunks = kMaxPartials;
  }
  // Chunk starts stay on 16-byte vectors: lengths are multiples of 1024 elements.
  plan->chunk_len = chunks == 1 ? plan->k : ceil_div(ceil_div(plan->k, chunks), 1024) * 1024;
  plan->chunks = chunks == 1 ? 1 : ceil_div(plan->k, plan->chunk_len);
  return true;
}

unsigned grid_for(int64_t blocks) {
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}

// ROW and GENERIC plans: the partials (or output) kernel, then FINALIZE where chunks > 1.
template <typename T, ReduceOp kOp, typename Params>
cudaError_t run_rows(const Plan& plan, const Params& p, cudaStream_t stream) {
  if (plan.k == 0) {  // empty reduction: sum 0, prod 1, mean NaN
    Params empty = p;
    empty.chunks = 0;
    reduce_finalize_kernel<T, kOp, 32, Params>
        <<<grid_for(ceil_div(plan.m, kReduceThreads / 32)), kReduceThreads, 0, stream>>>(empty);
    return cudaGetLastError();
  }
  const int64_t items = plan.m * plan.chunks;
  const unsigned grid = grid_for(ceil_div(items, kReduceThreads / plan.tpr));
  auto launch = [&](auto tpr) {
    constexpr int kTpr = decltype(tpr)::value;
    if constexpr (std::is_same_v<Params, RowParams>) {
      if (plan.kind == Plan::kGeneric) {
        if (plan.vector) {
          reduce_row_kernel<T, kOp, kTpr, kRowGenericVector, Params>
              <<<grid, kReduceThreads, 0, stream>>>(p);
        } else {
          reduce_row_kernel<T, kOp, kTpr, kRowGeneric, Params>
              <<<grid, kReduceThreads, 0, stream>>>(p);
        }
        return;
      }
    }
    if (plan.vector) {
      reduce_row_kernel<T, kOp, kTpr, kRowVector, Params><<<grid, kReduceThreads, 0, stream>>>(p);
    } else {
      reduce_row_kernel<T, kOp, kTpr, kRowScalar, Params><<<grid, kReduceThreads, 0, stream>>>(p);
    }
  };
  if (plan.tpr == 32) {
    launch(std::integral_constant<int, 32>{});
  } else {
    launch(std::integral_constant<int, kReduceThreads>{});
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || plan.chunks == 1) return err;
  return launch_finalize<T, kOp>(p, stream);
}

// COL plans: the column kernel, then FINALIZE over `fp` (the same outputs and partials)
// where chunks > 1.
template <typename T, ReduceOp kOp, typename Params, typename FinalizeParams>
cudaError_t run_cols(const Plan& plan, const Params& p, const FinalizeParams& fp,
                     cudaStream_t stream) {
  const int64_t blocks = plan.col_tiles * (plan.m / p.j);
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(plan.chunks));
  if (plan.vector) {
    reduce_col_kernel<T, kOp, true, Params><<<grid, kReduceThreads, 0, stream>>>(p);
  } else {
    reduce_col_kernel<T, kOp, false, Params><<<grid, kReduceThreads, 0, stream>>>(p);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || plan.chunks == 1) return err;
  return launch_finalize<T, kOp>(fp, stream);
}

template <typename T, ReduceOp kOp>
cudaError_t run_plan(const Plan& plan, const TensorRef& x, const TensorRef& out, void* workspace,
                     cudaStream_t stream) {
  if (plan.m == 0) return cudaSuccess;
  // The split path (chunks > 1) takes the kernel that holds 4 blocks per SM, the residency
  // its chunk count fills (tuning.cuh; ptxas -v, sm_90a, sum): for bf16 the lean one (58
  // registers; RowParams 76, 3 per SM); for f16 and f32 RowParams (60 and 62; their lean
  // ones, 42 and 48, hold 5 and left a tail: sum all f32 [16 Mi] 2.5% slower). Lean bf16
  // splits, H100 / H200: sum all [16 Mi] 1.13 → 1.17–1.18 / 1.05 → 1.15x torch, [64 Mi]
  // 1.04 / 0.93 → 1.00x, [64, 1 Mi] over the last axis 1.23 → 1.27 / 1.12 → 1.29x.
  constexpr bool lean_split = std::is_same_v<T, __nv_bfloat16>;
  if (plan.kind == Plan::kRow && plan.kept.n <= 1 && (plan.chunks == 1 || lean_split)) {
    RowLeanParams lp{x.data, out.data, workspace};
    lp.row_x = plan.kept.n == 1 ? plan.kept_x[0] : 0;
    lp.row_out = plan.kept.n == 1 ? plan.kept_out[0] : 0;
    lp.m = plan.m;
    lp.k = plan.k;
    lp.chunks = plan.chunks;
    lp.chunk_len = plan.chunk_len;
    return run_rows<T, kOp>(plan, lp, stream);
  }
  RowParams rp{};
  rp.x = x.data;
  rp.out = out.data;
  rp.partials = workspace;
  rp.kept = plan.kept;
  for (int i = 0; i < kMaxDims; ++i) {
    rp.kept_x[i] = plan.kept_x[i];
    rp.kept_out[i] = plan.kept_out[i];
    rp.red_x[i] = plan.red_x[i];
  }
  rp.red = plan.red;
  rp.m = plan.m;
  rp.k = plan.k;
  rp.chunks = plan.chunks;
  rp.chunk_len = plan.chunk_len;
  if (plan.kind != Plan::kCol || plan.k == 0) return run_rows<T, kOp>(plan, rp, stream);

  const bool outputs_linear =
      plan.kept.n == 1 ||
      (plan.kept.n == 2 && plan.kept_out[1] == plan.kept.size[0] * plan.kept_out[0]);
  if (plan.red.n == 1 && plan.kept.n <= 2 && outputs_linear) {
    ColLeanParams cp{x.data, out.data, workspace};
    cp.outer_x = plan.kept.n == 2 ? plan.kept_x[1] : 0;
    cp.red_x = plan.red_x[0];
    cp.out_x = plan.kept_out[0];
    cp.j = plan.kept.size[0];
    cp.m = plan.m;
    cp.k = plan.k;
    cp.chunks = plan.chunks;
    cp.chunk_len = plan.chunk_len;
    cp.col_tiles = plan.col_tiles;
    RowLeanParams fp{x.data, out.data, workspace};  // the finalize pass over the m outputs
    fp.row_out = cp.out_x;
    fp.m = plan.m;
    fp.k = plan.k;
    fp.chunks = plan.chunks;
    fp.chunk_len = plan.chunk_len;
    return run_cols<T, kOp>(plan, cp, fp, stream);
  }

  ColParams cp{};
  cp.x = x.data;
  cp.out = out.data;
  cp.partials = workspace;
  cp.kept = plan.kept;
  for (int i = 0; i < kMaxDims; ++i) {
    cp.kept_out[i] = plan.kept_out[i];
    cp.red_x[i] = plan.red_x[i];
  }
  cp.outer.n = plan.kept.n - 1;
  for (int i = 1; i < plan.kept.n; ++i) {
    cp.outer.size[i - 1] = plan.kept.size[i];
    cp.outer_x[i - 1] = plan.kept_x[i];
  }
  cp.red = plan.red;
  cp.j = plan.kept.size[0];
  cp.m = plan.m;
  cp.k = plan.k;
  cp.chunks = plan.chunks;
  cp.chunk_len = plan.chunk_len;
  cp.col_tiles = plan.col_tiles;
  return run_cols<T, kOp>(plan, cp, rp, stream);
}

template <typename T>
cudaError_t run_typed(ReduceOp op, const Plan& plan, const TensorRef& x, const TensorRef& out,
                      void* ws, cudaStream_t s) {
  switch (op) {
    case ReduceOp::sum: return run_plan<T, ReduceOp::sum>(plan, x, out, ws, s);
    case ReduceOp::mean: return run_plan<T, ReduceOp::mean>(plan, x, out, ws, s);
    case ReduceOp::prod: return run_plan<T, ReduceOp::prod>(plan, x, out, ws, s);
    case ReduceOp::max: return run_plan<T, ReduceOp::max>(plan, x, out, ws, s);
    case ReduceOp::min: return run_plan<T, ReduceOp::min>(plan, x, out, ws, s);
    case ReduceOp::argmax: return run_plan<T, ReduceOp::argmax>(plan, x, out, ws, s);
    case ReduceOp::argmin: return run_plan<T, ReduceOp::argmin>(plan, x, out, ws, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool can_implement_reduce(ReduceOp op, const TensorRef& x, uint32_t axes_mask,
                          const TensorRef& out, std::string* why) {
  if (!is_floating(x.dtype)) {
    if (why) *why = "x dtype must be f32, f16 or bf16";
    return false;
  }
  const bool arg = op == ReduceOp::argmax || op == ReduceOp::argmin;
  if (arg ? out.dtype != DType::i64 : out.dtype != x.dtype) {
    if (why) *why = arg ? "out dtype must be i64" : "out dtype must equal x dtype";
    return false;
  }
  Plan plan;
  return make_plan(op, x, axes_mask, out, &plan, why);
}

size_t reduce_workspace_bytes(ReduceOp op, const TensorRef& x, uint32_t axes_mask,
                              const TensorRef& out) {
  Plan plan;
  if (!make_plan(op, x, axes_mask, out, &plan, nullptr)) return 0;
  if (plan.chunks <= 1 || plan.k == 0) return 0;
  return static_cast<size_t>(plan.m * plan.chunks) * acc_size(op);
}

cudaError_t launch_reduce(ReduceOp op, const TensorRef& x, uint32_t axes_mask,
                          const TensorRef& out, void* workspace, cudaStream_t stream) {
  Plan plan;
  if (!make_plan(op, x, axes_mask, out, &plan, nullptr)) return cudaErrorInvalidValue;
  if (plan.chunks > 1 && plan.k != 0 && workspace == nullptr) return cudaErrorInvalidValue;
  switch (x.dtype) {
    case DType::f32: return run_typed<float>(op, plan, x, out, workspace, stream);
    case DType::f16: return run_typed<__half>(op, plan, x, out, workspace, stream);
    case DType::bf16: return run_typed<__nv_bfloat16>(op, plan, x, out, workspace, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gk::kernels::reductions
