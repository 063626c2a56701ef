// Whole on purpose (over 600 lines): one op family (STYLE.md); the packed, cached and chunked
// kernels share one Params type and the host code that picks among them.
// layernorm / rmsnorm (+ residual add), over the last axis of length H.
//
// CACHED (last-axis stride 1 everywhere, H ≤ 32768): one read of x (and residual),
// one write of out (and sum). kTpr threads per row, kE elements each (rows.cuh); a
// block holds 4 warp-rows (H ≤ 1024) or one row (kTpr threads).
//   PACKED (H % V == 0, 16-byte aligned; V = 8 bf16/f16, 4 f32):
//   for row in grid-stride(rows):                 // bf16 H=4096: 128 threads, 1 row
//     xv[kE/V] = 16-byte loads of x[row]          // kept as T: bf16 kE 32 = 16 regs
//     add_*: rv = loads of residual[row]; xv = T(xv + rv); sum[row] = xv
//     layernorm: mean = group sum(xv)/H           // f32, converted per use
//     var (or ms) = group sum((xv-mean)²)/H       // from registers, no re-read
//     for u: w, b = 16-byte loads; out[u] = (xv[u]-mean)/sqrt(var+eps)·w + b
//   Registers capped by __launch_bounds__ min-blocks (ptxas -v, sm_90a, no spills):
//   bf16/f16 kE 32 ≤ 64 regs → 8 blocks of 128 per SM, 64 KB of x in flight (was
//   114 regs, 4 blocks, 32 KB); f32 kE 32: 76 regs → 6 blocks, 96 KB (was 127, 4,
//   64 KB); add_* bf16 kE 32: 88 regs → 5 blocks (the f32-slot kernel: 116, 4). Per
//   row: 1 barrier per group_reduce (rms 1, layernorm 2), none at H ≤ 1024 (warp
//   shuffles only).
//   SLOTS AS F32 (scalar layout, or add_* f32 rows over 16384): v[kE] = x[row]
//     (+ residual[row], rounded to T and written to sum[row]); the same passes over v.
// CHUNKED (H > 32768): chunks of 512 threads × 32 in registers.
//   STATS: block per (row, chunk): (n, mean, M2) of the chunk (Σv² for rms) →
//          workspace; add_*: writes sum
//   WRITE: every thread merges the row's chunk stats in chunk order (Chan et al.),
//          re-reads its chunk (from sum for add_*), normalises, writes.
// STAGED (a last-axis stride ≠ 1): every such operand is copied into a packed workspace
//   (the elementwise copy, tiled through shared memory where another dim is contiguous),
//   the row path runs there, and staged outputs are copied back: what PyTorch does with
//   .contiguous(). A thread per row over the strided axis read a transposed bf16
//   [4096, 4096] at 0.043× PyTorch.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "device.cuh"
#include "elementwise.cuh"
#include "norm.cuh"
#include "rows.cuh"
#include "tuning.cuh"

namespace gk::kernels::reductions {
namespace {

using rows::block_threads;
using rows::RowOperands;

struct NormParams {
  const void* x;
  const void* res;
  const void* weight;
  const void* bias;
  void* out;
  void* sum;
  void* partials;
  RowOperands ops;  // 0 x, 1 out, 2 residual, 3 sum
  int64_t rows, k, chunks;
  float eps;
  int rms;
};

constexpr int kChunkTpr = 512;
constexpr int kChunkE = 32;
static_assert(int64_t{kChunkTpr} * kChunkE == tuning::kRowChunk, "chunk = one cached block");

// Loads x (+ residual) for one row or chunk into v; writes sum for add_*. With kRes
// false the residual code is not compiled in (it doubles the row's registers).
template <typename T, int kTpr, int kE, bool kVec, bool kRes = true>
__device__ __forceinline__ void load_input(const NormParams& p, int64_t row, int64_t begin,
                                           int64_t len, int t, float (&v)[kE]) {
  const T* x = static_cast<const T*>(p.x) + offset_of(row, p.ops.outer, p.ops.stride[0]) + begin;
  rows::load_row<T, kTpr, kE, kVec>(x, len, t, 0.0f, v);
  if (kRes && p.res != nullptr) {
    const T* r = static_cast<const T*>(p.res) + offset_of(row, p.ops.outer, p.ops.stride[2]) + begin;
    float rv[kE];
    rows::load_row<T, kTpr, kE, kVec>(r, len, t, 0.0f, rv);
#pragma unroll
    for (int s = 0; s < kE; ++s) v[s] = to_f32(from_f32<T>(v[s] + rv[s]));
    T* sum = static_cast<T*>(p.sum) + offset_of(row, p.ops.outer, p.ops.stride[3]) + begin;
    rows::store_row<T, kTpr, kE, kVec>(sum, len, t, v);
  }
}

// out = (v - mean) * inv * weight + bias for the slots of one row or chunk.
template <typename T, int kTpr, int kE, bool kVec>
__device__ __forceinline__ void write_output(const NormParams& p, int64_t row, int64_t begin,
                                             int64_t len, int t, float mean, float inv,
                                             float (&v)[kE]) {
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  if constexpr (kVec) {
    constexpr int kV = Vec16<T>::kN;
#pragma unroll
    for (int u = 0; u < kE / kV; ++u) {
      const int64_t i = (int64_t{u} * kTpr + t) * kV;
      if (i < len) {
        Vec16<T> wv, bv;
        if (w) wv = load_vec(w + begin + i);
        if (b) bv = load_vec(b + begin + i);
#pragma unroll
        for (int e = 0; e < kV; ++e) {
          float y = (v[u * kV + e] - mean) * inv;
          if (w) y *= to_f32(wv.v[e]);
          if (b) y += to_f32(bv.v[e]);
          v[u * kV + e] = y;
        }
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < kE; ++s) {
      const int64_t i = int64_t{s} * kTpr + t;
      if (i < len) {
        float y = (v[s] - mean) * inv;
        if (w) y *= to_f32(w[begin + i]);
        if (b) y += to_f32(b[begin + i]);
        v[s] = y;
      }
    }
  }
  T* out = static_cast<T*>(p.out) + offset_of(row, p.ops.outer, p.ops.stride[1]) + begin;
  rows::store_row<T, kTpr, kE, kVec>(out, len, t, v);
}

// Row offset of operand `op`: offset_of without the division by the outermost size
// (row < rows, so the quotient left after the inner dims is the outermost index).
__device__ __forceinline__ int64_t row_offset(const NormParams& p, int64_t row, int op) {
  const Dims& d = p.ops.outer;
  int64_t off = 0;
  for (int j = 0; j + 1 < d.n; ++j) {
    const int64_t q = row / d.size[j];
    off += (row - q * d.size[j]) * p.ops.stride[op][j];
    row = q;
  }
  return d.n > 0 ? off + row * p.ops.stride[op][d.n - 1] : off;
}

// The packed kernel's parameters where the rows' outer dims merge into one (each operand's
// rows a fixed stride apart, the common case); NormParams, 464 bytes, is over
// kLeanParamBytes.
struct NormRowParams {
  const void* x;
  const void* res;
  const void* weight;
  const void* bias;
  void* out;
  void* sum;
  int64_t rows, k;
  int64_t row_stride[4];  // 0 x, 1 out, 2 residual, 3 sum
  float eps;
  int rms;
};

static_assert(sizeof(NormRowParams) <= kLeanParamBytes, "see kLeanParamBytes");

__device__ __forceinline__ int64_t row_offset(const NormRowParams& p, int64_t row, int op) {
  return row * p.row_stride[op];
}

// Blocks per SM asked of ptxas for the packed kernel: a register cap of 64 per thread
// (1024 threads per SM) while the packed slice is ≤ 16 registers, 96 up to 32, else
// none. ptxas -v (sm_90a, CUDA 13.0), every instantiation, no spills: bf16 kE 32 at
// 64, f16 56, f32 76; kE 64 (H > 16384, uncapped) bf16 86, f16 76, f32 108.
// With the residual (add_*) the slice of x and that of the residual are live together
// while the sum is formed, so the cap is chosen for twice the slice.
template <typename T, int kTpr, int kE, bool kRes = false>
constexpr int packed_min_blocks() {
  constexpr int kSliceRegs = kE * static_cast<int>(sizeof(T)) / 4 * (kRes ? 2 : 1);
  constexpr int kCap = kSliceRegs <= 16 ? 64 : kSliceRegs <= 32 ? 96 : 0;
  constexpr int kPerSm = kCap == 0 ? 0 : 65536 / kCap / block_threads<kTpr>();
  return kPerSm > 0 ? kPerSm : 1;
}

// Element e of a packed vector as f32. For bf16 the conversion is one integer op on
// the 32-bit word; asm volatile keeps the compiler from hoisting the kE conversions
// out of the three passes (sum, Σd², write), which kept all kE floats live and spilled
// under the register cap (ptxas -v: 22/176 bytes at 64 registers).
template <typename T>
__device__ __forceinline__ float elem_f32(const Vec16<T>& v, int e) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    unsigned int word, r;
    memcpy(&word, &v.v[e & ~1], 4);
    if (e & 1) {
      asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(r) : "r"(word));
    } else {
      asm volatile("shl.b32 %0, %1, 16;" : "=r"(r) : "r"(word));
    }
    return __uint_as_float(r);
  } else {
    return to_f32(v.v[e]);
  }
}

enum class PackedForm { general, full_weight, full_weight_bias };

// Vector layout (k % V == 0, all 16-byte aligned). The row slice stays as loaded, kE/V
// 16-byte vectors of T (bf16 kE 32: 16 registers, against 32 floats + the load
// buffer before), and is converted to f32 where used, so ptxas fits more blocks per SM
// and more bytes are in flight. Sums run over the same slots in the same order as the
// f32-slot kernel (slots past k added +0 there and are skipped here).
// kRes (add_*): the residual slice is loaded beside x, the sum is rounded to T, written
// to `sum` and kept packed in place of x for the passes that follow.
// kForm (PackedForm): the general kernel tests the row's end and the weight and bias at
// run time; the full-row forms are compiled for k == kTpr · kE with the weight (and
// bias) given, so no test is left and (x - mean) · inv · w + b becomes one FMA at the end.
// bf16 [16384, 4096] (H100, five processes): 58 → 48 registers, 8 → 10 blocks per SM;
// layernorm 96.5–96.8 → 97.7–97.8% of the same-run memcpy, rmsnorm 96.3–97.4 → 98.4–98.8%.
// Params: NormRowParams, or NormParams where the outer dims do not merge (launch_packed).
template <typename T, int kTpr, int kE, bool kRes, PackedForm kForm, typename Params>
__global__ void __launch_bounds__(block_threads<kTpr>(), packed_min_blocks<T, kTpr, kE, kRes>())
    norm_packed_kernel(Params p) {
  constexpr bool kFull = kForm != PackedForm::general;
  constexpr int kV = Vec16<T>::kN;
  constexpr int kU = kE / kV;
  static_assert(kE % kV == 0, "kE must hold whole vectors");
  constexpr int kGroups = block_threads<kTpr>() / kTpr;
  __shared__ float scratch[2][32];
  BlockReducer block(scratch);
  const int t = threadIdx.x % kTpr;
  const int64_t k = kFull ? int64_t{kTpr} * kE : p.k;
  const float inv_k = 1.0f / static_cast<float>(k);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  const bool has_w = kFull || w != nullptr;
  const bool has_b = kFull ? kForm == PackedForm::full_weight_bias : b != nullptr;
  for (int64_t row0 = int64_t{blockIdx.x} * kGroups; row0 < p.rows;
       row0 += int64_t{gridDim.x} * kGroups) {
    const int64_t row = row0 + threadIdx.x / kTpr;
    if (kTpr == 32 && row >= p.rows) break;  // whole warps leave; blocks never split
    Vec16<T> xv[kU];
    const T* x = static_cast<const T*>(p.x) + row_offset(p, row, 0);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = (int64_t{u} * kTpr + t) * kV;
      if (i < k) xv[u] = load_vec(x + i);
    }
    if constexpr (kRes) {
      const T* r = static_cast<const T*>(p.res) + row_offset(p, row, 2);
      T* sum = static_cast<T*>(p.sum) + row_offset(p, row, 3);
      Vec16<T> rv[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t i = (int64_t{u} * kTpr + t) * kV;
        if (i < k) rv[u] = load_vec(r + i);
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t i = (int64_t{u} * kTpr + t) * kV;
        if (i < k) {
#pragma unroll
          for (int e = 0; e < kV; ++e)
            xv[u].v[e] = from_f32<T>(elem_f32(xv[u], e) + elem_f32(rv[u], e));
          store_vec(sum + i, xv[u]);
        }
      }
    }
    float mean = 0.0f, sq = 0.0f;
    if (!p.rms) {
      float s = 0.0f;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if ((int64_t{u} * kTpr + t) * kV < k) {
#pragma unroll
          for (int e = 0; e < kV; ++e) s += elem_f32(xv[u], e);
        }
      }
      mean = rows::group_reduce<kTpr>(s, AddOp{}, block) * inv_k;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if ((int64_t{u} * kTpr + t) * kV < k) {
#pragma unroll
        for (int e = 0; e < kV; ++e) {
          const float d = elem_f32(xv[u], e) - mean;
          sq += d * d;
        }
      }
    }
    sq = rows::group_reduce<kTpr>(sq, AddOp{}, block);
    const float inv = 1.0f / sqrtf(sq * inv_k + p.eps);
    T* out = static_cast<T*>(p.out) + row_offset(p, row, 1);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = (int64_t{u} * kTpr + t) * kV;
      if (i < k) {
        Vec16<T> wv, bv, o;
        if (has_w) wv = load_vec(w + i);
        if (has_b) bv = load_vec(b + i);
#pragma unroll
        for (int e = 0; e < kV; ++e) {
          float y = (elem_f32(xv[u], e) - mean) * inv;
          if (has_w) y *= elem_f32(wv, e);
          if (has_b) y += elem_f32(bv, e);
          o.v[e] = from_f32<T>(y);
        }
        store_vec(out + i, o);
      }
    }
  }
}

// Any layout, with or without the residual: slots as f32 (rows.cuh).
template <typename T, int kTpr, int kE, bool kVec, bool kRes>
__global__ void __launch_bounds__(block_threads<kTpr>()) norm_cached_kernel(NormParams p) {
  constexpr int kGroups = block_threads<kTpr>() / kTpr;
  __shared__ float scratch[2][32];
  BlockReducer block(scratch);
  const int t = threadIdx.x % kTpr;
  const float inv_k = 1.0f / static_cast<float>(p.k);
  for (int64_t row0 = int64_t{blockIdx.x} * kGroups; row0 < p.rows;
       row0 += int64_t{gridDim.x} * kGroups) {
    const int64_t row = row0 + threadIdx.x / kTpr;
    if (kTpr == 32 && row >= p.rows) break;  // whole warps leave; blocks never split
    float v[kE];
    load_input<T, kTpr, kE, kVec, kRes>(p, row, 0, p.k, t, v);
    float mean = 0.0f, sq = 0.0f;
    if (!p.rms) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kE; ++i) s += v[i];
      mean = rows::group_reduce<kTpr>(s, AddOp{}, block) * inv_k;
    }
#pragma unroll
    for (int i = 0; i < kE; ++i) {
      const float d = v[i] - mean;
      if (rows::slot_index<T, kTpr, kVec>(i, t) < p.k) sq += d * d;
    }
    sq = rows::group_reduce<kTpr>(sq, AddOp{}, block);
    const float inv = 1.0f / sqrtf(sq * inv_k + p.eps);
    write_output<T, kTpr, kE, kVec>(p, row, 0, p.k, t, mean, inv, v);
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kChunkTpr) norm_chunk_stats_kernel(NormParams p) {
  __shared__ float scratch[2][32];
  BlockReducer block(scratch);
  const int t = threadIdx.x;
  for (int64_t item = blockIdx.x; item < p.rows * p.chunks; item += gridDim.x) {
    const int64_t row = item / p.chunks;
    const int64_t c = item - row * p.chunks;
    const int64_t begin = c * tuning::kRowChunk;
    const int64_t len = p.k - begin < tuning::kRowChunk ? p.k - begin : tuning::kRowChunk;
    float v[kChunkE];
    load_input<T, kChunkTpr, kChunkE, kVec>(p, row, begin, len, t, v);
    float mean = 0.0f, sq = 0.0f;
    if (!p.rms) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kChunkE; ++i) s += v[i];
      mean = block.all_reduce(s, AddOp{}) / static_cast<float>(len);
    }
#pragma unroll
    for (int i = 0; i < kChunkE; ++i) {
      const float d = v[i] - mean;
      if (rows::slot_index<T, kChunkTpr, kVec>(i, t) < len) sq += d * d;
    }
    sq = block.all_reduce(sq, AddOp{});
    if (t == 0) {
      float* part = static_cast<float*>(p.partials) + item * 3;
      part[0] = static_cast<float>(len);
      part[1] = mean;
      part[2] = sq;
    }
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kChunkTpr) norm_chunk_write_kernel(NormParams p) {
  const int t = threadIdx.x;
  for (int64_t item = blockIdx.x; item < p.rows * p.chunks; item += gridDim.x) {
    const int64_t row = item / p.chunks;
    const int64_t c = item - row * p.chunks;
    const float* part = static_cast<const float*>(p.partials) + row * p.chunks * 3;
    // Chan et al. pairwise merge, chunk order fixed.
    float n = part[0], mean = part[1], m2 = part[2];
    for (int64_t i = 1; i < p.chunks; ++i) {
      const float nb = part[3 * i], mb = part[3 * i + 1], m2b = part[3 * i + 2];
      const float nn = n + nb;
      const float delta = mb - mean;
      mean += delta * (nb / nn);
      m2 += m2b + delta * delta * (n * nb / nn);
      n = nn;
    }
    if (p.rms) mean = 0.0f;  // rms partials hold Σv² in m2 with mean 0
    const float inv = 1.0f / sqrtf(m2 / static_cast<float>(p.k) + p.eps);
    const int64_t begin = c * tuning::kRowChunk;
    const int64_t len = p.k - begin < tuning::kRowChunk ? p.k - begin : tuning::kRowChunk;
    const bool from_sum = p.res != nullptr;
    const T* src = from_sum
        ? static_cast<const T*>(p.sum) + offset_of(row, p.ops.outer, p.ops.stride[3]) + begin
        : static_cast<const T*>(p.x) + offset_of(row, p.ops.outer, p.ops.stride[0]) + begin;
    float v[kChunkE];
    rows::load_row<T, kChunkTpr, kChunkE, kVec>(src, len, t, 0.0f, v);
    write_output<T, kChunkTpr, kChunkE, kVec>(p, row, begin, len, t, mean, inv, v);
  }
}

// The packed kernel with NormRowParams where the rows' outer dims merged into one (or
// none), else with the full NormParams.
template <typename T, int kTpr, int kE, bool kRes, PackedForm kForm = PackedForm::general>
void launch_packed(const NormParams& p, unsigned grid, cudaStream_t stream) {
  constexpr int kThreads = block_threads<kTpr>();
  if (p.ops.outer.n > 1) {
    norm_packed_kernel<T, kTpr, kE, kRes, kForm, NormParams><<<grid, kThreads, 0, stream>>>(p);
    return;
  }
  NormRowParams r{p.x, p.res, p.weight, p.bias, p.out, p.sum, p.rows, p.k, {}, p.eps, p.rms};
  for (int i = 0; i < 4; ++i) r.row_stride[i] = p.ops.outer.n == 1 ? p.ops.stride[i][0] : 0;
  norm_packed_kernel<T, kTpr, kE, kRes, kForm, NormRowParams><<<grid, kThreads, 0, stream>>>(r);
}

unsigned capped_grid(int64_t blocks) {
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}

// Tensors of the call: x, out, then residual and sum when present.
int gather(const NormArgs& a, const TensorRef** ts) {
  ts[0] = &a.x;
  ts[1] = &a.out;
  if (a.residual) {
    ts[2] = a.residual;
    ts[3] = a.sum;
    return 4;
  }
  return 2;
}

bool use_rows_path(const NormArgs& a) {
  const int last = a.x.ndim - 1;
  const int64_t h = a.x.shape[last];
  if (h == 1) return true;
  const TensorRef* ts[4];
  const int n = gather(a, ts);
  for (int i = 0; i < n; ++i)
    if (ts[i]->strides[last] != 1) return false;
  if (a.weight && a.weight->strides[0] != 1) return false;
  if (a.bias && a.bias->strides[0] != 1) return false;
  return true;
}

// Scratch of the row path: chunk statistics for rows longer than the cached limit.
size_t rows_workspace_bytes(const NormArgs& a) {
  const int64_t k = a.x.shape[a.x.ndim - 1];
  if (k <= rows::kMaxCachedRow) return 0;
  return static_cast<size_t>(a.x.numel() / k * ceil_div(k, tuning::kRowChunk) * 3) * sizeof(float);
}

// The STAGED path's operands and workspace layout: a packed copy of every operand whose
// last-axis stride is not 1, in the order x, residual, weight, bias, out, sum; then the
// row path's scratch. `rows` points into this struct, so it is neither copied nor moved.
struct NormStaging {
  static constexpr int kOperands = 6;
  NormArgs rows;
  TensorRef residual, weight, bias, sum;
  bool copy[kOperands] = {};
  size_t rows_offset = 0, bytes = 0;

  NormStaging(const NormArgs& a, char* ws) : rows(a) {
    TensorRef* dst[kOperands] = {&rows.x, &residual, &weight, &bias, &rows.out, &sum};
    const TensorRef* src[kOperands] = {&a.x, a.residual, a.weight, a.bias, &a.out, a.sum};
    for (int i = 0; i < kOperands; ++i) {
      if (!src[i]) continue;
      const TensorRef& t = *src[i];
      *dst[i] = t;
      if (t.strides[t.ndim - 1] == 1) continue;
      *dst[i] = packed_like(t, ws ? ws + bytes : nullptr);
      bytes += packed_bytes(t);
      copy[i] = true;
    }
    if (a.residual) rows.residual = &residual;
    if (a.weight) rows.weight = &weight;
    if (a.bias) rows.bias = &bias;
    if (a.sum) rows.sum = &sum;
    rows_offset = bytes;
    bytes += rows_workspace_bytes(rows);
  }
  NormStaging(const NormStaging&) = delete;
  NormStaging& operator=(const NormStaging&) = delete;
};

template <typename T>
cudaError_t run_rows(const NormArgs& a, void* ws, cudaStream_t stream);

template <typename T>
cudaError_t run(const NormArgs& a, void* ws, cudaStream_t stream) {
  if (a.x.numel() == 0) return cudaSuccess;
  if (use_rows_path(a)) return run_rows<T>(a, ws, stream);
  const NormStaging s(a, static_cast<char*>(ws));
  const TensorRef* user[NormStaging::kOperands] = {&a.x,   a.residual, a.weight,
                                                   a.bias, &a.out,     a.sum};
  const TensorRef* staged[NormStaging::kOperands] = {&s.rows.x, &s.residual, &s.weight,
                                                     &s.bias,   &s.rows.out, &s.sum};
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < 4 && err == cudaSuccess; ++i)  // inputs
    if (s.copy[i]) err = launch_cast(*user[i], *staged[i], stream);
  if (err == cudaSuccess) err = run_rows<T>(s.rows, static_cast<char*>(ws) + s.rows_offset, stream);
  for (int i = 4; i < NormStaging::kOperands && err == cudaSuccess; ++i)  // outputs
    if (s.copy[i]) err = launch_cast(*staged[i], *user[i], stream);
  return err;
}

// The row path: every operand's last-axis stride is 1 (or rows of one element).
template <typename T>
cudaError_t run_rows(const NormArgs& a, void* ws, cudaStream_t stream) {
  const int last = a.x.ndim - 1;
  NormParams p{};
  p.x = a.x.data;
  p.res = a.residual ? a.residual->data : nullptr;
  p.weight = a.weight ? a.weight->data : nullptr;
  p.bias = a.bias ? a.bias->data : nullptr;
  p.out = a.out.data;
  p.sum = a.sum ? a.sum->data : nullptr;
  p.partials = ws;
  p.k = a.x.shape[last];
  p.eps = a.eps;
  p.rms = a.rms ? 1 : 0;
  const TensorRef* ts[4];
  const int n = gather(a, ts);
  p.ops = rows::make_row_operands(ts, n, last);
  p.rows = 1;
  for (int i = 0; i < p.ops.outer.n; ++i) p.rows *= p.ops.outer.size[i];
  constexpr int kV = Vec16<T>::kN;
  bool vec = p.k % kV == 0 && rows::rows_aligned16(p.ops, ts, n);
  if (a.weight && !aligned16(a.weight->data)) vec = false;
  if (a.bias && !aligned16(a.bias->data)) vec = false;
  if (p.k > rows::kMaxCachedRow) {
    p.chunks = ceil_div(p.k, tuning::kRowChunk);
    const unsigned grid = capped_grid(p.rows * p.chunks);
    if (vec) {
      norm_chunk_stats_kernel<T, true><<<grid, kChunkTpr, 0, stream>>>(p);
      norm_chunk_write_kernel<T, true><<<grid, kChunkTpr, 0, stream>>>(p);
    } else {
      norm_chunk_stats_kernel<T, false><<<grid, kChunkTpr, 0, stream>>>(p);
      norm_chunk_write_kernel<T, false><<<grid, kChunkTpr, 0, stream>>>(p);
    }
    return cudaGetLastError();
  }
  return rows::with_row_config(p.k, [&](auto tpr, auto e) {
    constexpr int kTpr = decltype(tpr)::value;
    constexpr int kE = decltype(e)::value;
    constexpr int kThreads = block_threads<kTpr>();
    const unsigned grid = capped_grid(ceil_div(p.rows, kThreads / kTpr));
    // Vector rows take the packed kernel (bf16 [*,4096]: 58 registers, 8 blocks of 128
    // per SM; the f32-slot kernel it replaces used 114, 4 blocks; add_*: see
    // packed_min_blocks). 16-bit rows that fill a configuration exactly, with a weight,
    // take its full-row form (48 registers, 10 blocks); f32 rows are not measured there
    // and keep the general form, as does every row with a residual.
    // f32 rows over 16384 with a residual keep the f32-slot kernel: two packed slices of
    // 64 floats each spilled (272 bytes, ptxas -v).
    if (vec && p.res) {
      if constexpr (kE * sizeof(T) * 2 <= 256) {
        launch_packed<T, kTpr, kE, true>(p, grid, stream);
      } else {
        norm_cached_kernel<T, kTpr, kE, true, true><<<grid, kThreads, 0, stream>>>(p);
      }
    } else if (vec) {
      if constexpr (sizeof(T) == 2) {
        if (p.k == kTpr * kE && p.weight) {
          if (p.bias) {
            launch_packed<T, kTpr, kE, false, PackedForm::full_weight_bias>(p, grid, stream);
          } else {
            launch_packed<T, kTpr, kE, false, PackedForm::full_weight>(p, grid, stream);
          }
          return cudaGetLastError();
        }
      }
      launch_packed<T, kTpr, kE, false>(p, grid, stream);
    } else if (p.res) {
      norm_cached_kernel<T, kTpr, kE, false, true><<<grid, kThreads, 0, stream>>>(p);
    } else {
      norm_cached_kernel<T, kTpr, kE, false, false><<<grid, kThreads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

}  // namespace

bool can_implement_norm(const NormArgs& a, std::string* why) {
  auto fail = [&](const char* m) {
    if (why) *why = m;
    return false;
  };
  if (!is_floating(a.x.dtype)) return fail("x dtype must be f32, f16 or bf16");
  if (a.x.ndim < 1 || a.x.ndim > kMaxDims) return fail("x must have 1 to 8 dims");
  if (a.out.dtype != a.x.dtype) return fail("out dtype must equal x dtype");
  if (a.residual && (!a.sum || a.residual->dtype != a.x.dtype || a.sum->dtype != a.x.dtype))
    return fail("residual and sum must be given together with x's dtype");
  if (a.weight && (a.weight->dtype != a.x.dtype || a.weight->ndim != 1))
    return fail("weight must be 1-D with x's dtype");
  if (a.bias && (a.bias->dtype != a.x.dtype || a.bias->ndim != 1))
    return fail("bias must be 1-D with x's dtype");
  if (a.rms && a.bias) return fail("rmsnorm takes no bias");
  return true;
}

size_t norm_workspace_bytes(const NormArgs& a) {
  if (a.x.ndim < 1 || a.x.numel() == 0) return 0;
  if (use_rows_path(a)) return rows_workspace_bytes(a);
  return NormStaging(a, nullptr).bytes;
}

cudaError_t launch_norm(const NormArgs& a, void* workspace, cudaStream_t stream) {
  if (norm_workspace_bytes(a) > 0 && workspace == nullptr) return cudaErrorInvalidValue;
  switch (a.x.dtype) {
    case DType::f32: return run<float>(a, workspace, stream);
    case DType::f16: return run<__half>(a, workspace, stream);
    case DType::bf16: return run<__nv_bfloat16>(a, workspace, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gk::kernels::reductions
