// Row machinery shared by softmax and the norms: a row of K elements is held in
// registers by kTpr threads, kE elements each, so the row is read from memory once.
//
//   vector layout (K % V == 0, rows 16-byte aligned): element of slot (u, e) is
//     (u * kTpr + t) * V + e           u < kE / V, e < V     (16-byte loads, coalesced)
//   scalar layout: element of slot s is s * kTpr + t
//
// Configurations (kTpr threads per row, kE elements per thread), smallest that holds
// the row wins; rows of up to 1024 elements get one warp each, 4 rows per block.
#pragma once

#include <type_traits>

#include "device.cuh"

namespace gk::kernels::reductions::rows {

template <int N>
using IC = std::integral_constant<int, N>;

inline constexpr int kWarpRowsPerBlock = 4;
// Largest register-cached row (kTpr 512 × kE 64); longer rows are chunked.
inline constexpr int64_t kMaxCachedRow = 32768;

// Calls f(IC<kTpr>, IC<kE>) for the configuration that holds a row of k elements.
// Register budget: kE 32 at ≤ 512 threads per row (128 registers allowed); kE 64 at
// 512 spills a few bytes (ptxas -v) and 1024 × 32 spilled more, so 32768 is the cap.
// H100, 2026 first run: (256, 16) gave bf16 softmax [16384,4096] 71.5% of copy;
// 4 vectors per thread instead of 2 is the change measured next (docs/kernels).
template <typename F>
cudaError_t with_row_config(int64_t k, F&& f) {
  if (k <= 256) return f(IC<32>{}, IC<8>{});
  if (k <= 512) return f(IC<32>{}, IC<16>{});
  if (k <= 1024) return f(IC<32>{}, IC<32>{});
  if (k <= 2048) return f(IC<64>{}, IC<32>{});
  if (k <= 4096) return f(IC<128>{}, IC<32>{});
  if (k <= 8192) return f(IC<256>{}, IC<32>{});
  if (k <= 16384) return f(IC<512>{}, IC<32>{});
  return f(IC<512>{}, IC<64>{});
}

template <int kTpr>
__host__ __device__ constexpr int block_threads() {
  return kTpr == 32 ? 32 * kWarpRowsPerBlock : kTpr;
}

// Element index of slot s (0 ≤ s < kE) for thread t.
template <typename T, int kTpr, bool kVec>
__device__ __forceinline__ int64_t slot_index(int s, int t) {
  if constexpr (kVec) {
    constexpr int kV = Vec16<T>::kN;
    return (int64_t{s / kV} * kTpr + t) * kV + s % kV;
  } else {
    return int64_t{s} * kTpr + t;
  }
}

// Loads slots of a row; slots past k get `pad`. A row holds at most kTpr·kE elements
// (≤ 32768), so indices are 32-bit: 64-bit ones cost an IMAD pair per slot, and the
// f32 softmax row kernel was ~1/3 integer instructions (ptxas SASS).
template <typename T, int kTpr, int kE, bool kVec>
__device__ __forceinline__ void load_row(const T* row, int64_t k64, int t, float pad,
                                         float (&v)[kE]) {
  const int k = static_cast<int>(k64);
  if constexpr (kVec) {
    constexpr int kV = Vec16<T>::kN;
    static_assert(kE % kV == 0, "kE must hold whole vectors");
    Vec16<T> raw[kE / kV];
#pragma unroll
    for (int u = 0; u < kE / kV; ++u) {
      const int i = (u * kTpr + t) * kV;
      if (i < k) raw[u] = load_vec(row + i);
    }
#pragma unroll
    for (int u = 0; u < kE / kV; ++u) {
      const int i = (u * kTpr + t) * kV;
#pragma unroll
      for (int e = 0; e < kV; ++e) v[u * kV + e] = i < k ? to_f32(raw[u].v[e]) : pad;
    }
  } else {
#pragma unroll
    for (int s = 0; s < kE; ++s) {
      const int i = s * kTpr + t;
      v[s] = i < k ? to_f32(row[i]) : pad;
    }
  }
}

template <typename T, int kTpr, int kE, bool kVec>
__device__ __forceinline__ void store_row(T* row, int64_t k64, int t, const float (&v)[kE]) {
  const int k = static_cast<int>(k64);
  if constexpr (kVec) {
    constexpr int kV = Vec16<T>::kN;
#pragma unroll
    for (int u = 0; u < kE / kV; ++u) {
      const int i = (u * kTpr + t) * kV;
      if (i < k) {
        Vec16<T> r;
#pragma unroll
        for (int e = 0; e < kV; ++e) r.v[e] = from_f32<T>(v[u * kV + e]);
        store_vec(row + i, r);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < kE; ++s) {
      const int i = s * kTpr + t;
      if (i < k) row[i] = from_f32<T>(v[s]);
    }
  }
}

// Row-group all-reduce: a warp butterfly, then (kTpr > 32) warps in order.
template <int kTpr, typename F>
__device__ __forceinline__ float group_reduce(float v, F combine, BlockReducer& block) {
  if constexpr (kTpr == 32) {
    return warp_all_reduce(v, combine);
  } else {
    return block.all_reduce(v, combine);
  }
}

// Outer (non-row) dims of up to 4 operands that share the row's logical shape.
struct RowOperands {
  Dims outer;                   // innermost first
  int64_t stride[4][kMaxDims];  // per operand
};

// Builds RowOperands from tensors of one shape whose dim `axis` is the row; merges
// outer dims contiguous in every operand. `n` operands, `ts[i]` may not be null.
inline RowOperands make_row_operands(const TensorRef* const* ts, int n, int axis) {
  RowOperands r{};
  const TensorRef& s = *ts[0];
  int nd = 0;
  int64_t size[kMaxDims], st[4][kMaxDims];
  for (int d = 0; d < s.ndim; ++d) {
    if (d == axis || s.shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int i = 0; i < n && merge; ++i)
      if (st[i][nd - 1] != ts[i]->strides[d] * s.shape[d]) merge = false;
    if (merge) {
      size[nd - 1] *= s.shape[d];
      for (int i = 0; i < n; ++i) st[i][nd - 1] = ts[i]->strides[d];
    } else {
      size[nd] = s.shape[d];
      for (int i = 0; i < n; ++i) st[i][nd] = ts[i]->strides[d];
      ++nd;
    }
  }
  r.outer.n = nd;
  for (int j = 0; j < nd; ++j) {
    r.outer.size[j] = size[nd - 1 - j];
    for (int i = 0; i < n; ++i) r.stride[i][j] = st[i][nd - 1 - j];
  }
  return r;
}

// True when every operand's row base (outer strides) and pointer sit on 16 bytes.
inline bool rows_aligned16(const RowOperands& r, const TensorRef* const* ts, int n) {
  for (int i = 0; i < n; ++i) {
    if (!aligned16(ts[i]->data)) return false;
    const int64_t es = static_cast<int64_t>(dtype_size(ts[i]->dtype));
    for (int j = 0; j < r.outer.n; ++j)
      if ((r.stride[i][j] * es) % 16 != 0) return false;
  }
  return true;
}

}  // namespace gk::kernels::reductions::rows
