// Host-side types of the reductions kernel family, safe to include from plain C++
// (the plugin glue): tensor views and dtypes. Device helpers are in device.cuh.
//
// No GPUkit policy lives here: views are raw pointers with shapes and strides in
// elements, and every host wrapper returns a cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gk::kernels::reductions {

inline constexpr int kMaxDims = 8;
// Kernel parameter structs on the hot paths stay within this many bytes: launches with more
// than about 200 bytes of parameters ran 0.3–0.8 µs longer on every other run of 100 calls
// (H100, the same kernel with 28 to 332 bytes).
inline constexpr size_t kLeanParamBytes = 192;

// b8: bool, one byte holding 0 or 1 (the comparisons' output).
enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, i64 = 4, b8 = 5 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
  }
  return 0;
}

inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

// A strided tensor: element [i0..in] lives at data + sum(i_d * strides[d]) elements.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// `t` with dim `axis` moved last: the same memory, seen in another dim order.
inline TensorRef axis_last(const TensorRef& t, int axis) {
  TensorRef r = t;
  for (int d = axis; d + 1 < t.ndim; ++d) {
    r.shape[d] = t.shape[d + 1];
    r.strides[d] = t.strides[d + 1];
  }
  r.shape[t.ndim - 1] = t.shape[axis];
  r.strides[t.ndim - 1] = t.strides[axis];
  return r;
}

// Bytes of a row-major copy of `t`, rounded up to 256 so that copies placed one after
// another in a workspace each start 256-byte aligned.
inline size_t packed_bytes(const TensorRef& t) {
  const size_t n = static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
  return (n + 255) / 256 * 256;
}

// A row-major tensor of `t`'s shape and dtype at `data`.
inline TensorRef packed_like(const TensorRef& t, void* data) {
  TensorRef r = t;
  r.data = data;
  int64_t s = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    r.strides[d] = s;
    s *= t.shape[d];
  }
  return r;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace gk::kernels::reductions
