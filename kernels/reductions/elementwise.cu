// Whole on purpose (over 600 lines): one op family (STYLE.md); the strided, contiguous and
// tiled kernels share the functors and the broadcast/merge host code that picks among them.
// Elementwise unary / binary / comparison / gated / cast.
//
// Host: broadcast inputs to out's shape (stride 0), drop size-1 dims, merge dims that
// are contiguous in every operand. What is left is [outer…, inner]: a contiguous
// tensor becomes one dim.
//
// Tiling (one launch, blocks of kEwThreads):
//   for tile in grid-stride(num_tiles):            // tile = (row, column chunk)
//     row, chunk = tile / tiles_per_row, tile % tiles_per_row
//     base[k] = offset_of(row, outer dims, operand k strides)   // once per tile
//     vector path (inner strides 1 or 0, 16-byte aligned):
//       for u in 0..kEwVectorsPerThread-1:         // all loads issued before use
//         col = chunk*tile + (u*threads + tid)*V; load V-wide from each operand
//       compute and store V-wide
//     scalar path: the same with V = 1 and inner strides arbitrary
// CONTIGUOUS (one dim left, every operand stride 1 and 16-byte aligned):
//   block b = one tile of T threads × V elements    // T = 768 for two inputs, else 128
//     p = (b*T + tid)*V                             // one 16-byte vector per operand
//     load V-wide from each operand, compute, store V-wide (threads past n return)
// TRANSPOSED (an input's stride-1 dim a is not out's stride-1 dim b, e.g. x.T into a
// row-major out): 64 × 64 tiles over (a, b) (32 × 32 where elements cannot be paired), the
// other dims a batch:
//   for tile in grid-stride(batch × tiles):
//     threads 32 (x) × 8 (y): load pairs tile[b0+y+8j][a0+2x, +1] from every input whose
//       stride along a is 1 (coalesced along a) into shared memory; barrier
//     out[a0+y+8j][b0+2x, +1] = fn(tile[2x, +1][y+8j], other inputs read directly)
//       (coalesced along b)
// Without it each warp's 32 stores (or loads) hit 32 rows: silu of a transposed bf16
// [8192, 8192] view read 0.18× PyTorch.
// 16-bit types use the hardware exp/reciprocal (see "element functions").
// Everything else lives in registers; no shared memory.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "device.cuh"
#include "elementwise.cuh"
#include "tuning.cuh"

namespace gk::kernels::reductions {
namespace {

using tuning::kEwContiguousBinaryThreads;
using tuning::kEwContiguousThreads;
using tuning::kEwResidentThreads;
using tuning::kEwThreads;
using tuning::kEwVectorsPerThread;

struct EwParams {
  void* out;
  const void* in0;
  const void* in1;
  Dims outer;                         // innermost first
  int64_t outer_stride[3][kMaxDims];  // out, in0, in1
  int64_t inner;
  int64_t inner_stride[3];
  int64_t tiles_per_row;
  int64_t num_tiles;
};

template <typename T, int N>
struct alignas(sizeof(T) * N) VecN {
  T v[N];
};

// ---- element functions -------------------------------------------------------------
// kLow: the result is rounded to a 16-bit type (8 or 11 significant bits), so the
// exponential and the reciprocal use the hardware approximations (MUFU.EX2/RCP,
// relative error ~1e-6 away from overflow) instead of the IEEE-exact forms, whose
// division carries a slow-path branch per element (SASS: BSSY/CALL around each
// division). In SASS the 16-bit kernels were instruction bound: gelu bf16 ~80
// instructions per element, silu bf16 ~45 (H100: 51% and 61% of copy).
template <bool kLow>
__device__ __forceinline__ float exp_f(float x) {
  if constexpr (kLow) {
    return __expf(x);
  } else {
    return expf(x);
  }
}

// The MUFU reciprocal alone, without the range fix-ups around it (a compare, a select and
// two multiplies) that __fdividef carries for denormal operands: for y ≥ 1 (or +inf,
// giving 0) they cannot matter. exp_ftz (device.cuh) is the exponential's counterpart,
// used where the result is scaled by x and rounded to 16 bits, so that a result below
// 2^-126 flushed to 0 changes nothing but bf16 denormals of |x| > 13.
__device__ __forceinline__ float rcp_ge1(float y) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return r;
}

// erfc form: 0.5·x·(1 + erf(x/√2)) cancels for x ≪ 0 (relative error 1e-4 at x = -5
// in f32, seen in tests/gpu/reductions); erfc keeps full relative precision there.
// For kLow, gelu(x) = x·Φ(x) with q = Φ(-|x|) = erfc(|x|/√2)/2 from one branch-free
// approximation: erfc(z) ≈ t·exp(-z² + P(t)), t = 1/(1 + z/2), P of degree 9 (Numerical
// Recipes' erfcc; fractional error < 1.2e-7, here ~1e-6 with the hardware exp and
// reciprocal), then Φ(x) = 1 - q for x ≥ 0 and q below. The erff/erfcf pair it replaces
// ran both of its branches in any warp with a lane below -3 (most warps, for inputs
// spread over ±5), at about 80 instructions per element.
__device__ __forceinline__ float half_erfc(float z) {  // erfc(z) / 2, z ≥ 0 or NaN
  const float t = rcp_ge1(1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f - 0.6931471805599453f);  // folds in the 1/2
  return t * exp_ftz(fmaf(-z, z, p));
}
template <bool kLow>
__device__ __forceinline__ float gelu_erf(float x) {
  if constexpr (kLow) {
    const float q = half_erfc(fabsf(x) * 0.70710678118654752f);
    return x * (x >= 0.0f ? 1.0f - q : q);
  }
  return 0.5f * x * erfcf(-x * 0.70710678118654752f);
}
template <bool kLow>
__device__ __forceinline__ float sigmoid(float x) {
  if constexpr (kLow) {
    return rcp_ge1(1.0f + exp_ftz(-x));
  } else {
    return 1.0f / (1.0f + expf(-x));
  }
}
// 0.5·x·(1 + tanh(u)) == x·sigmoid(2u), without the cancellation for u ≪ 0.
template <bool kLow>
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  const float u = k * (x + 0.044715f * x * x * x);
  if constexpr (kLow) {
    return x * sigmoid<kLow>(2.0f * u);
  } else {
    return x / (1.0f + expf(-2.0f * u));
  }
}

template <UnaryOp kOp, bool kLow>
__device__ __forceinline__ float unary_f(float x) {
  if constexpr (kOp == UnaryOp::neg) return -x;
  if constexpr (kOp == UnaryOp::abs) return fabsf(x);
  if constexpr (kOp == UnaryOp::exp) return exp_f<kLow>(x);
  if constexpr (kOp == UnaryOp::log) return logf(x);
  if constexpr (kOp == UnaryOp::sqrt) return sqrtf(x);
  if constexpr (kOp == UnaryOp::rsqrt) return 1.0f / sqrtf(x);
  if constexpr (kOp == UnaryOp::tanh) return tanhf(x);
  if constexpr (kOp == UnaryOp::sigmoid) return sigmoid<kLow>(x);
  if constexpr (kOp == UnaryOp::relu) return x > 0.0f ? x : (x != x ? x : 0.0f);
  if constexpr (kOp == UnaryOp::gelu_erf) return gelu_erf<kLow>(x);
  if constexpr (kOp == UnaryOp::gelu_tanh) return gelu_tanh<kLow>(x);
  if constexpr (kOp == UnaryOp::silu) return x * sigmoid<kLow>(x);
  return x;
}

template <BinaryOp kOp, bool kLow>
__device__ __forceinline__ float binary_f(float a, float b) {
  if constexpr (kOp == BinaryOp::add) return a + b;
  if constexpr (kOp == BinaryOp::sub) return a - b;
  if constexpr (kOp == BinaryOp::mul) return a * b;
  if constexpr (kOp == BinaryOp::div) return a / b;
  if constexpr (kOp == BinaryOp::maximum) return nan_max(a, b);
  if constexpr (kOp == BinaryOp::minimum) return nan_min(a, b);
  if constexpr (kOp == BinaryOp::pow) return powf(a, b);
  if constexpr (kOp == BinaryOp::swiglu) return a * sigmoid<kLow>(a) * b;
  if constexpr (kOp == BinaryOp::geglu_erf) return gelu_erf<kLow>(a) * b;
  if constexpr (kOp == BinaryOp::geglu_tanh) return gelu_tanh<kLow>(a) * b;
  return a;
}

template <typename T, UnaryOp kOp>
struct UnaryFn {
  using In = T;
  using Out = T;
  static constexpr int kInputs = 1;
  __device__ __forceinline__ T operator()(T x, T) const {
    return from_f32<T>(unary_f<kOp, sizeof(T) == 2>(to_f32(x)));
  }
};

template <typename T, BinaryOp kOp>
struct BinaryFn {
  using In = T;
  using Out = T;
  static constexpr int kInputs = 2;
  __device__ __forceinline__ T operator()(T a, T b) const {
    return from_f32<T>(binary_f<kOp, sizeof(T) == 2>(to_f32(a), to_f32(b)));
  }
};

// Floating inputs compare as f32 (exact for f16 and bf16), integers as themselves.
template <typename T, CompareOp kOp>
struct CompareFn {
  using In = T;
  using Out = uint8_t;
  static constexpr int kInputs = 2;
  __device__ __forceinline__ uint8_t operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return compare(a, b);
    } else {
      return compare(to_f32(a), to_f32(b));
    }
  }
  template <typename C>
  __device__ __forceinline__ static uint8_t compare(C a, C b) {
    if constexpr (kOp == CompareOp::eq) return a == b;
    if constexpr (kOp == CompareOp::ne) return a != b;
    if constexpr (kOp == CompareOp::lt) return a < b;
    if constexpr (kOp == CompareOp::le) return a <= b;
    if constexpr (kOp == CompareOp::gt) return a > b;
    if constexpr (kOp == CompareOp::ge) return a >= b;
    return 0;
  }
};

template <typename TIn, typename TOut>
struct CastFn {
  using In = TIn;
  using Out = TOut;
  static constexpr int kInputs = 1;
  __device__ __forceinline__ TOut operator()(TIn x, TIn) const {
    if constexpr (std::is_same_v<TOut, int32_t>) {
      if constexpr (std::is_same_v<TIn, int32_t>) {
        return x;
      } else {
        const float f = to_f32(x);
        if (f != f) return 0;
        if (f >= 2147483647.0f) return 2147483647;
        if (f <= -2147483648.0f) return (-2147483647 - 1);
        return static_cast<int32_t>(f);  // truncates toward zero
      }
    } else if constexpr (std::is_same_v<TIn, int32_t>) {
      return from_f32<TOut>(static_cast<float>(x));
    } else if constexpr (std::is_same_v<TIn, TOut>) {
      return x;
    } else {
      return from_f32<TOut>(to_f32(x));
    }
  }
};

template <typename Fn>
__host__ __device__ constexpr int vec_width() {
  constexpr size_t a = sizeof(typename Fn::In);
  constexpr size_t b = sizeof(typename Fn::Out);
  return static_cast<int>(16 / (a > b ? a : b));
}

template <typename Fn, bool kVector>
__global__ void __launch_bounds__(kEwThreads) elementwise_kernel(EwParams p) {
  using In = typename Fn::In;
  using Out = typename Fn::Out;
  constexpr int kV = kVector ? vec_width<Fn>() : 1;
  constexpr int kU = kVector ? kEwVectorsPerThread : kEwVectorsPerThread * vec_width<Fn>();
  constexpr int64_t kTile = int64_t{kEwThreads} * kU * kV;
  const Fn fn;
  const In* in0 = static_cast<const In*>(p.in0);
  const In* in1 = static_cast<const In*>(p.in1);
  Out* out = static_cast<Out*>(p.out);

  for (int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
    const int64_t row = tile / p.tiles_per_row;
    const int64_t col0 = (tile - row * p.tiles_per_row) * kTile;
    const int64_t b_out = offset_of(row, p.outer, p.outer_stride[0]);
    const int64_t b_in0 = offset_of(row, p.outer, p.outer_stride[1]);
    const int64_t b_in1 = Fn::kInputs > 1 ? offset_of(row, p.outer, p.outer_stride[2]) : 0;

    if constexpr (kVector) {
      using VIn = VecN<In, kV>;
      using VOut = VecN<Out, kV>;
      VIn a[kU], b[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t col = col0 + (int64_t{u} * kEwThreads + threadIdx.x) * kV;
        if (col < p.inner) {
          if (p.inner_stride[1] == 0) {
            const In s = in0[b_in0];
#pragma unroll
            for (int k = 0; k < kV; ++k) a[u].v[k] = s;
          } else {
            a[u] = load_bits<VIn>(in0 + b_in0 + col);
          }
          if constexpr (Fn::kInputs > 1) {
            if (p.inner_stride[2] == 0) {
              const In s = in1[b_in1];
#pragma unroll
              for (int k = 0; k < kV; ++k) b[u].v[k] = s;
            } else {
              b[u] = load_bits<VIn>(in1 + b_in1 + col);
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t col = col0 + (int64_t{u} * kEwThreads + threadIdx.x) * kV;
        if (col < p.inner) {
          VOut r;
#pragma unroll
          for (int k = 0; k < kV; ++k) r.v[k] = fn(a[u].v[k], Fn::kInputs > 1 ? b[u].v[k] : In{});
          store_bits(out + b_out + col, r);
        }
      }
    } else {
      In a[kU], b[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t col = col0 + int64_t{u} * kEwThreads + threadIdx.x;
        if (col < p.inner) {
          a[u] = in0[b_in0 + col * p.inner_stride[1]];
          if constexpr (Fn::kInputs > 1) b[u] = in1[b_in1 + col * p.inner_stride[2]];
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t col = col0 + int64_t{u} * kEwThreads + threadIdx.x;
        if (col < p.inner) {
          out[b_out + col * p.inner_stride[0]] = fn(a[u], Fn::kInputs > 1 ? b[u] : In{});
        }
      }
    }
  }
}

// Every operand contiguous and 16-byte aligned, the same element count: no row/column
// split, no stride or broadcast handling. Block b covers elements [b·kTile, (b+1)·kTile)
// with kTile = kThreads·V: one 16-byte vector per operand per thread and one tile per
// block, the block work of PyTorch's vectorized kernels, so large tensors launch many
// short blocks and small ones still spread over every SM. kThreads comes from
// contiguous_threads<Fn>() (tuning.cuh: residency per op kind).
// The contiguous kernel's parameters (EwParams, 336 bytes, is over kLeanParamBytes).
struct EwContiguousParams {
  void* out;
  const void* in0;
  const void* in1;
  int64_t n;
};
static_assert(sizeof(EwContiguousParams) <= kLeanParamBytes, "see kLeanParamBytes");

template <typename Fn, int kThreads>
__global__ void __launch_bounds__(kThreads, kEwResidentThreads / kThreads)
    elementwise_contiguous_kernel(EwContiguousParams p) {
  using In = typename Fn::In;
  using Out = typename Fn::Out;
  constexpr int kV = vec_width<Fn>();
  using VIn = VecN<In, kV>;
  using VOut = VecN<Out, kV>;
  const Fn fn;
  const int64_t first = (int64_t{blockIdx.x} * kThreads + threadIdx.x) * kV;
  if (first >= p.n) return;  // the last tile (n is a multiple of V)
  const VIn a = load_bits<VIn>(static_cast<const In*>(p.in0) + first);
  VIn b;
  if constexpr (Fn::kInputs > 1) b = load_bits<VIn>(static_cast<const In*>(p.in1) + first);
  VOut r;
#pragma unroll
  for (int k = 0; k < kV; ++k) r.v[k] = fn(a.v[k], Fn::kInputs > 1 ? b.v[k] : In{});
  store_bits(static_cast<Out*>(p.out) + first, r);
}

// TRANSPOSED path (see the top of the file). Operand k: 0 out, 1 in0, 2 in1.
constexpr int kTile = 32;  // threads along a tile side; each covers kP elements
constexpr int kTileRows = 8;

struct EwTileParams {
  void* out;
  const void* in0;
  const void* in1;
  Dims batch;  // the dims other than a and b, innermost first
  int64_t batch_stride[3][kMaxDims];
  int64_t size_a, size_b;
  int64_t stride_a[3], stride_b[3];
  int64_t tiles_a, tiles_b, num_tiles;
  bool staged[3];  // inputs read through shared memory (stride 1 along a)
};

// kP = 2: tiles of 64 × 64, each thread loading (and storing) pairs of adjacent elements,
// 16 elements per thread; kP = 1 (sizes, strides or pointers not paired): 32 × 32.
template <typename Fn, int kP>
__global__ void __launch_bounds__(kTile* kTileRows) elementwise_tiled_kernel(EwTileParams p) {
  using In = typename Fn::In;
  using Out = typename Fn::Out;
  constexpr int kStaged = Fn::kInputs;
  constexpr int kSide = kTile * kP;
  // +1 column: the write phase reads down a column of the tile; with the odd row length
  // (in 2- or 4-byte words) consecutive threads hit consecutive banks.
  __shared__ In tile[kStaged][kSide][kSide + 1];
  const Fn fn;
  const In* in[2] = {static_cast<const In*>(p.in0), static_cast<const In*>(p.in1)};
  Out* out = static_cast<Out*>(p.out);
  const int tx = threadIdx.x % kTile;
  const int ty = threadIdx.x / kTile;
  const int64_t per_batch = p.tiles_a * p.tiles_b;
  for (int64_t t = blockIdx.x; t < p.num_tiles; t += gridDim.x) {
    const int64_t item = t / per_batch;
    const int64_t rem = t - item * per_batch;
    const int64_t a0 = (rem % p.tiles_a) * kSide;
    const int64_t b0 = (rem / p.tiles_a) * kSide;
    int64_t base[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) base[k] = offset_of(item, p.batch, p.batch_stride[k]);
      // Load: along a, coalesced.
#pragma unroll
    for (int k = 0; k < kStaged; ++k) {
      if (!p.staged[k + 1]) continue;
      const int64_t a = a0 + tx * kP;
#pragma unroll
      for (int j = 0; j < kSide / kTileRows; ++j) {
        const int bl = ty + j * kTileRows;
        const int64_t b = b0 + bl;
        if (a < p.size_a && b < p.size_b) {
          const In* src = in[k] + base[k + 1] + a + b * p.stride_b[k + 1];
          if constexpr (kP == 1) {
            tile[k][bl][tx] = *src;
          } else {
            const VecN<In, kP> v = load_bits<VecN<In, kP>>(src);
#pragma unroll
            for (int e = 0; e < kP; ++e) tile[k][bl][tx * kP + e] = v.v[e];
          }
        }
      }
    }
    __syncthreads();
    // Store: along b, coalesced.
    const int64_t b = b0 + tx * kP;
#pragma unroll
    for (int j = 0; j < kSide / kTileRows; ++j) {
      const int al = ty + j * kTileRows;
      const int64_t a = a0 + al;
      if (a < p.size_a && b < p.size_b) {
        VecN<Out, kP> r;
#pragma unroll
        for (int e = 0; e < kP; ++e) {
          In v[2] = {In{}, In{}};
#pragma unroll
          for (int k = 0; k < kStaged; ++k) {
            v[k] = p.staged[k + 1]
                       ? tile[k][tx * kP + e][al]
                       : in[k][base[k + 1] + a * p.stride_a[k + 1] + (b + e) * p.stride_b[k + 1]];
          }
          r.v[e] = fn(v[0], v[1]);
        }
        Out* dst = out + base[0] + a * p.stride_a[0] + b;
        if constexpr (kP == 1) {
          *dst = r.v[0];
        } else {
          store_bits(dst, r);
        }
      }
    }
    __syncthreads();
  }
}

template <typename Fn>
constexpr int contiguous_threads() {
  return Fn::kInputs > 1 ? kEwContiguousBinaryThreads : kEwContiguousThreads;
}

// ---- host side ---------------------------------------------------------------------

// Operands broadcast to `out`'s shape: dims in out order, outermost first.
struct Layout {
  int nd = 0;
  int64_t shape[kMaxDims];
  int64_t strides[3][kMaxDims];
};

// Right-aligns `t` to `out`'s rank; broadcast dims get stride 0.
void broadcast_strides(const TensorRef& t, const TensorRef& out, int64_t* strides) {
  const int lead = out.ndim - t.ndim;
  for (int d = 0; d < out.ndim; ++d) {
    const int td = d - lead;
    if (td < 0 || t.shape[td] == 1) {
      strides[d] = 0;
    } else {
      strides[d] = t.strides[td];
    }
  }
}

// Drops size-1 dims and merges dims contiguous in every operand.
Layout coalesce(const TensorRef& out, const int64_t (*strides)[kMaxDims], int nops) {
  Layout l;
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] == 1) continue;
    if (l.nd > 0) {
      bool merge = true;
      for (int k = 0; k < nops; ++k) {
        if (l.strides[k][l.nd - 1] != strides[k][d] * out.shape[d]) merge = false;
      }
      if (merge) {
        l.shape[l.nd - 1] *= out.shape[d];
        for (int k = 0; k < nops; ++k) l.strides[k][l.nd - 1] = strides[k][d];
        continue;
      }
    }
    l.shape[l.nd] = out.shape[d];
    for (int k = 0; k < nops; ++k) l.strides[k][l.nd] = strides[k][d];
    ++l.nd;
  }
  if (l.nd == 0) {  // a single element
    l.nd = 1;
    l.shape[0] = 1;
    for (int k = 0; k < nops; ++k) l.strides[k][0] = 1;
  }
  return l;
}

// The dims (a, b) of the TRANSPOSED path for `l`, or false: b where out has stride 1, a
// where an input has stride 1, both at least kTile / 2 long (shorter ones waste most of a
// tile and are left to the scalar path).
bool tiled_dims(const Layout& l, int nops, int* da, int* db) {
  *db = -1;
  *da = -1;
  for (int d = 0; d < l.nd; ++d)
    if (l.strides[0][d] == 1 && l.shape[d] >= kTile / 2) *db = d;
  if (*db < 0) return false;
  for (int k = 1; k < nops && *da < 0; ++k)
    for (int d = 0; d < l.nd; ++d)
      if (d != *db && l.strides[k][d] == 1 && l.shape[d] >= kTile / 2) *da = d;
  return *da >= 0;
}

template <typename Fn>
cudaError_t launch_tiled(const Layout& l, int da, int db, void* out, const void* in0,
                         const void* in1, cudaStream_t stream) {
  constexpr int nops = Fn::kInputs + 1;
  EwTileParams p{};
  p.out = out;
  p.in0 = in0;
  p.in1 = in1;
  p.size_a = l.shape[da];
  p.size_b = l.shape[db];
  int64_t items = 1;
  for (int d = l.nd - 1; d >= 0; --d) {  // innermost first
    if (d == da || d == db) continue;
    const int i = p.batch.n++;
    p.batch.size[i] = l.shape[d];
    for (int k = 0; k < nops; ++k) p.batch_stride[k][i] = l.strides[k][d];
    items *= l.shape[d];
  }
  for (int k = 0; k < nops; ++k) {
    p.stride_a[k] = l.strides[k][da];
    p.stride_b[k] = l.strides[k][db];
    p.staged[k] = k > 0 && p.stride_a[k] == 1;
  }
  // Pairs: both sizes even, and every paired access (staged inputs along a, out along b)
  // starts on an even element of an aligned pointer; and the 64 x 64 tiles of every staged
  // input fit the 48 KiB of static shared memory (two 8-byte inputs do not).
  constexpr bool kPairedFits =
      sizeof(typename Fn::In) * Fn::kInputs * (2 * kTile) * (2 * kTile + 1) <= 48 * 1024;
  bool paired = kPairedFits && p.size_a % 2 == 0 && p.size_b % 2 == 0;
  const void* ptrs[3] = {out, in0, in1};
  const size_t esize[3] = {sizeof(typename Fn::Out), sizeof(typename Fn::In),
                           sizeof(typename Fn::In)};
  for (int k = 0; k < nops && paired; ++k) {
    if (k > 0 && !p.staged[k]) continue;
    if (reinterpret_cast<uintptr_t>(ptrs[k]) % (2 * esize[k]) != 0) paired = false;
    if ((k == 0 ? p.stride_a[k] : p.stride_b[k]) % 2 != 0) paired = false;
    for (int i = 0; i < p.batch.n; ++i)
      if (p.batch_stride[k][i] % 2 != 0) paired = false;
  }
  const int64_t side = paired ? 2 * kTile : kTile;
  p.tiles_a = ceil_div(p.size_a, side);
  p.tiles_b = ceil_div(p.size_b, side);
  p.num_tiles = items * p.tiles_a * p.tiles_b;
  if (p.num_tiles == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(p.num_tiles < (1 << 20) ? p.num_tiles : (1 << 20));
  if constexpr (kPairedFits) {
    if (paired) {
      elementwise_tiled_kernel<Fn, 2><<<grid, kTile * kTileRows, 0, stream>>>(p);
      return cudaGetLastError();
    }
  }
  elementwise_tiled_kernel<Fn, 1><<<grid, kTile * kTileRows, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename Fn>
cudaError_t launch_layout(const Layout& l, void* out, const void* in0, const void* in1,
                          cudaStream_t stream) {
  constexpr int kV = vec_width<Fn>();
  constexpr int nops = Fn::kInputs + 1;
  EwParams p{};
  p.out = out;
  p.in0 = in0;
  p.in1 = in1;
  p.inner = l.shape[l.nd - 1];
  p.outer.n = l.nd - 1;
  int64_t rows = 1;
  for (int i = 0; i < l.nd - 1; ++i) {
    const int d = l.nd - 2 - i;  // innermost outer dim first
    p.outer.size[i] = l.shape[d];
    for (int k = 0; k < nops; ++k) p.outer_stride[k][i] = l.strides[k][d];
    rows *= l.shape[d];
  }
  for (int k = 0; k < nops; ++k) p.inner_stride[k] = l.strides[k][l.nd - 1];
  if (rows == 0 || p.inner == 0) return cudaSuccess;

  // 16-byte path: inner strides 1 (or 0 for an input), rows start on a vector.
  bool vector = p.inner % kV == 0 && p.inner_stride[0] == 1;
  const void* ptrs[3] = {out, in0, in1};
  const size_t esize[3] = {sizeof(typename Fn::Out), sizeof(typename Fn::In),
                           sizeof(typename Fn::In)};
  for (int k = 0; k < nops && vector; ++k) {
    const size_t align = esize[k] * kV;
    if (p.inner_stride[k] != 0 && p.inner_stride[k] != 1) vector = false;
    if (reinterpret_cast<uintptr_t>(ptrs[k]) % align != 0) vector = false;
    if (p.inner_stride[k] == 1) {
      for (int i = 0; i < p.outer.n; ++i) {
        if ((p.outer_stride[k][i] * static_cast<int64_t>(esize[k])) % static_cast<int64_t>(align) !=
            0)
          vector = false;
      }
    }
  }
  const int64_t tile = int64_t{kEwThreads} * kEwVectorsPerThread * kV;
  p.tiles_per_row = ceil_div(p.inner, tile);
  p.num_tiles = rows * p.tiles_per_row;
  // Grid-stride beyond 2^20 tiles (each tile is ≥ 4096 elements, so a launch still
  // covers ≥ 4 G elements before any block loops).
  const unsigned grid = static_cast<unsigned>(p.num_tiles < (1 << 20) ? p.num_tiles : (1 << 20));
  bool contiguous = vector && p.outer.n == 0;
  for (int k = 0; k < nops; ++k) contiguous = contiguous && p.inner_stride[k] == 1;
  if (contiguous) {
    constexpr int kThreads = contiguous_threads<Fn>();
    // One tile per block: 2^31 - 1 blocks cover ≥ 2^40 elements.
    const int64_t tiles = ceil_div(p.inner, int64_t{kThreads} * kV);
    if (tiles > int64_t{INT32_MAX}) return cudaErrorInvalidValue;
    elementwise_contiguous_kernel<Fn, kThreads>
        <<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(
            EwContiguousParams{p.out, p.in0, p.in1, p.inner});
  } else if (vector) {
    elementwise_kernel<Fn, true><<<grid, kEwThreads, 0, stream>>>(p);
  } else if (int da, db; tiled_dims(l, nops, &da, &db)) {
    return launch_tiled<Fn>(l, da, db, out, in0, in1, stream);
  } else {
    elementwise_kernel<Fn, false><<<grid, kEwThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

template <typename Body>
cudaError_t with_float_type(DType t, Body&& body) {
  switch (t) {
    case DType::f32:
      return body(float{});
    case DType::f16:
      return body(__half{});
    case DType::bf16:
      return body(__nv_bfloat16{});
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename Body>
cudaError_t with_cast_type(DType t, Body&& body) {
  switch (t) {
    case DType::f32:
      return body(float{});
    case DType::f16:
      return body(__half{});
    case DType::bf16:
      return body(__nv_bfloat16{});
    case DType::i32:
      return body(int32_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename Body>
cudaError_t with_compare_type(DType t, Body&& body) {
  switch (t) {
    case DType::i32:
      return body(int32_t{});
    case DType::i64:
      return body(int64_t{});
    default:
      return with_float_type(t, body);
  }
}

bool check_rank(const TensorRef& t, const char* name, std::string* why) {
  if (t.ndim > kMaxDims) {
    if (why)
      *why = std::string(name) + " has " + std::to_string(t.ndim) + " dims; at most " +
             std::to_string(kMaxDims) + " are supported";
    return false;
  }
  return true;
}

bool check_float(const TensorRef& t, const char* name, std::string* why) {
  if (!is_floating(t.dtype)) {
    if (why) *why = std::string(name) + " dtype must be f32, f16 or bf16";
    return false;
  }
  return true;
}

template <UnaryOp kOp>
cudaError_t unary_typed(const TensorRef& x, const TensorRef& out, cudaStream_t stream) {
  return with_float_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t s[3][kMaxDims];
    for (int d = 0; d < out.ndim; ++d) s[0][d] = out.strides[d];
    broadcast_strides(x, out, s[1]);
    const Layout l = coalesce(out, s, 2);
    return launch_layout<UnaryFn<T, kOp>>(l, out.data, x.data, nullptr, stream);
  });
}

// Two inputs broadcast to `out`, their layouts coalesced, launched as Fn.
template <typename Fn>
cudaError_t launch_two_inputs(const TensorRef& a, const TensorRef& b, const TensorRef& out,
                              cudaStream_t stream) {
  int64_t s[3][kMaxDims];
  for (int d = 0; d < out.ndim; ++d) s[0][d] = out.strides[d];
  broadcast_strides(a, out, s[1]);
  broadcast_strides(b, out, s[2]);
  const Layout l = coalesce(out, s, 3);
  return launch_layout<Fn>(l, out.data, a.data, b.data, stream);
}

template <BinaryOp kOp>
cudaError_t binary_typed(const TensorRef& a, const TensorRef& b, const TensorRef& out,
                         cudaStream_t stream) {
  return with_float_type(out.dtype, [&](auto tag) {
    return launch_two_inputs<BinaryFn<decltype(tag), kOp>>(a, b, out, stream);
  });
}

template <CompareOp kOp>
cudaError_t compare_typed(const TensorRef& a, const TensorRef& b, const TensorRef& out,
                          cudaStream_t stream) {
  return with_compare_type(a.dtype, [&](auto tag) {
    return launch_two_inputs<CompareFn<decltype(tag), kOp>>(a, b, out, stream);
  });
}

}  // namespace

bool can_implement_unary(UnaryOp, const TensorRef& x, const TensorRef& out, std::string* why) {
  if (!check_rank(out, "out", why) || !check_float(x, "x", why)) return false;
  if (x.dtype != out.dtype) {
    if (why) *why = "x and out dtypes differ";
    return false;
  }
  return true;
}

cudaError_t launch_unary(UnaryOp op, const TensorRef& x, const TensorRef& out,
                         cudaStream_t stream) {
  switch (op) {
    case UnaryOp::neg:
      return unary_typed<UnaryOp::neg>(x, out, stream);
    case UnaryOp::abs:
      return unary_typed<UnaryOp::abs>(x, out, stream);
    case UnaryOp::exp:
      return unary_typed<UnaryOp::exp>(x, out, stream);
    case UnaryOp::log:
      return unary_typed<UnaryOp::log>(x, out, stream);
    case UnaryOp::sqrt:
      return unary_typed<UnaryOp::sqrt>(x, out, stream);
    case UnaryOp::rsqrt:
      return unary_typed<UnaryOp::rsqrt>(x, out, stream);
    case UnaryOp::tanh:
      return unary_typed<UnaryOp::tanh>(x, out, stream);
    case UnaryOp::sigmoid:
      return unary_typed<UnaryOp::sigmoid>(x, out, stream);
    case UnaryOp::relu:
      return unary_typed<UnaryOp::relu>(x, out, stream);
    case UnaryOp::gelu_erf:
      return unary_typed<UnaryOp::gelu_erf>(x, out, stream);
    case UnaryOp::gelu_tanh:
      return unary_typed<UnaryOp::gelu_tanh>(x, out, stream);
    case UnaryOp::silu:
      return unary_typed<UnaryOp::silu>(x, out, stream);
  }
  return cudaErrorInvalidValue;
}

bool can_implement_binary(BinaryOp, const TensorRef& a, const TensorRef& b, const TensorRef& out,
                          std::string* why) {
  if (!check_rank(out, "out", why) || !check_float(out, "out", why)) return false;
  if (a.dtype != out.dtype || b.dtype != out.dtype) {
    if (why) *why = "a, b and out dtypes differ";
    return false;
  }
  if (a.ndim > out.ndim || b.ndim > out.ndim) {
    if (why) *why = "an input has more dims than out";
    return false;
  }
  return true;
}

cudaError_t launch_binary(BinaryOp op, const TensorRef& a, const TensorRef& b, const TensorRef& out,
                          cudaStream_t stream) {
  switch (op) {
    case BinaryOp::add:
      return binary_typed<BinaryOp::add>(a, b, out, stream);
    case BinaryOp::sub:
      return binary_typed<BinaryOp::sub>(a, b, out, stream);
    case BinaryOp::mul:
      return binary_typed<BinaryOp::mul>(a, b, out, stream);
    case BinaryOp::div:
      return binary_typed<BinaryOp::div>(a, b, out, stream);
    case BinaryOp::maximum:
      return binary_typed<BinaryOp::maximum>(a, b, out, stream);
    case BinaryOp::minimum:
      return binary_typed<BinaryOp::minimum>(a, b, out, stream);
    case BinaryOp::pow:
      return binary_typed<BinaryOp::pow>(a, b, out, stream);
    case BinaryOp::swiglu:
      return binary_typed<BinaryOp::swiglu>(a, b, out, stream);
    case BinaryOp::geglu_erf:
      return binary_typed<BinaryOp::geglu_erf>(a, b, out, stream);
    case BinaryOp::geglu_tanh:
      return binary_typed<BinaryOp::geglu_tanh>(a, b, out, stream);
  }
  return cudaErrorInvalidValue;
}

bool can_implement_compare(CompareOp, const TensorRef& a, const TensorRef& b, const TensorRef& out,
                           std::string* why) {
  if (!check_rank(out, "out", why)) return false;
  const bool served = is_floating(a.dtype) || a.dtype == DType::i32 || a.dtype == DType::i64;
  if (!served) {
    if (why) *why = "a dtype must be f32, f16, bf16, i32 or i64";
    return false;
  }
  if (b.dtype != a.dtype) {
    if (why) *why = "a and b dtypes differ";
    return false;
  }
  if (out.dtype != DType::b8) {
    if (why) *why = "out dtype must be bool";
    return false;
  }
  if (a.ndim > out.ndim || b.ndim > out.ndim) {
    if (why) *why = "an input has more dims than out";
    return false;
  }
  return true;
}

cudaError_t launch_compare(CompareOp op, const TensorRef& a, const TensorRef& b,
                           const TensorRef& out, cudaStream_t stream) {
  switch (op) {
    case CompareOp::eq:
      return compare_typed<CompareOp::eq>(a, b, out, stream);
    case CompareOp::ne:
      return compare_typed<CompareOp::ne>(a, b, out, stream);
    case CompareOp::lt:
      return compare_typed<CompareOp::lt>(a, b, out, stream);
    case CompareOp::le:
      return compare_typed<CompareOp::le>(a, b, out, stream);
    case CompareOp::gt:
      return compare_typed<CompareOp::gt>(a, b, out, stream);
    case CompareOp::ge:
      return compare_typed<CompareOp::ge>(a, b, out, stream);
  }
  return cudaErrorInvalidValue;
}

bool can_implement_cast(const TensorRef& x, const TensorRef& out, std::string* why) {
  if (!check_rank(out, "out", why)) return false;
  auto ok = [](DType t) { return is_floating(t) || t == DType::i32; };
  if (!ok(x.dtype) || !ok(out.dtype)) {
    if (why) *why = "cast dtypes must be f32, f16, bf16 or i32";
    return false;
  }
  return true;
}

cudaError_t launch_cast(const TensorRef& x, const TensorRef& out, cudaStream_t stream) {
  return with_cast_type(x.dtype, [&](auto in_tag) {
    return with_cast_type(out.dtype, [&](auto out_tag) {
      using TIn = decltype(in_tag);
      using TOut = decltype(out_tag);
      int64_t s[3][kMaxDims];
      for (int d = 0; d < out.ndim; ++d) s[0][d] = out.strides[d];
      broadcast_strides(x, out, s[1]);
      const Layout l = coalesce(out, s, 2);
      return launch_layout<CastFn<TIn, TOut>>(l, out.data, x.data, nullptr, stream);
    });
  });
}

}  // namespace gk::kernels::reductions
