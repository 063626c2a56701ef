// Strided N-d iteration, element load/store and dtype dispatch for the cpu plugin.
//
// Every op walks its tensors through NdLoop: a loop shape plus, per operand, a base
// pointer and byte strides over that shape (0 for broadcast, negative for reversed views).
// NdLoop drops size-1 dims and merges dims that are contiguous for every operand, then
// calls a body once per innermost row, so bodies are plain 1-d loops. The logical
// row-major order of the loop shape is kept, which the deterministic reductions rely on.
#ifndef GPUKIT_PLUGINS_CPU_STRIDED_ITER_H_
#define GPUKIT_PLUGINS_CPU_STRIDED_ITER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpukit/gpukit_plugin.h"
#include "half.h"

namespace gk::cpu {

inline constexpr int kMaxDims = GK_MAX_DIMS;

template <size_t N>
class NdLoop {
 public:
  NdLoop(int ndim, const int64_t* shape) : ndim_(ndim) {
    for (int d = 0; d < ndim; ++d) shape_[d] = shape[d];
  }

  // Operand k starts at `base` and moves `byte_strides[d]` bytes per step of loop dim d.
  void set_operand(size_t k, const void* base, const int64_t* byte_strides) {
    base_[k] = static_cast<char*>(const_cast<void*>(base));
    for (int d = 0; d < ndim_; ++d) strides_[k][d] = byte_strides[d];
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim_; ++d) n *= shape_[d];
    return n;
  }

  // Calls body(ptrs, n, strides) for every innermost row: ptrs[k] is operand k's first
  // element of the row, strides[k] its byte step along the row.
  template <class Body>
  void run(Body&& body) {
    if (numel() == 0) return;
    simplify();
    std::array<int64_t, N> inner{};
    int64_t n = 1;
    if (ndim_ > 0) {
      n = shape_[ndim_ - 1];
      for (size_t k = 0; k < N; ++k) inner[k] = strides_[k][ndim_ - 1];
    }
    const int outer_dims = ndim_ > 0 ? ndim_ - 1 : 0;
    std::array<char*, N> ptrs = base_;
    std::array<int64_t, kMaxDims> index{};
    while (true) {
      body(ptrs, n, inner);
      // Odometer over the outer dims, last one fastest.
      int d = outer_dims - 1;
      for (; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) ptrs[k] += strides_[k][d];
        if (++index[d] < shape_[d]) break;
        for (size_t k = 0; k < N; ++k) ptrs[k] -= strides_[k][d] * shape_[d];
        index[d] = 0;
      }
      if (d < 0) return;
    }
  }

 private:
  void simplify() {
    int out = 0;
    for (int d = 0; d < ndim_; ++d) {
      if (shape_[d] == 1) continue;
      if (out > 0) {
        // Merge into the previous kept dim when it steps exactly over this one.
        bool mergeable = true;
        for (size_t k = 0; k < N; ++k) {
          if (strides_[k][out - 1] != strides_[k][d] * shape_[d]) mergeable = false;
        }
        if (mergeable) {
          shape_[out - 1] *= shape_[d];
          for (size_t k = 0; k < N; ++k) strides_[k][out - 1] = strides_[k][d];
          continue;
        }
      }
      shape_[out] = shape_[d];
      for (size_t k = 0; k < N; ++k) strides_[k][out] = strides_[k][d];
      ++out;
    }
    ndim_ = out;
  }

  int ndim_;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<char*, N> base_{};
  std::array<std::array<int64_t, kMaxDims>, N> strides_{};
};

// Byte strides of `t` read over `shape` (ndim dims) by NumPy broadcasting: t's dims align
// to the right, a size-1 or missing dim gets stride 0. False when t does not broadcast.
inline bool broadcast_byte_strides(const gk_plugin_tensor& t, size_t elem_size, int ndim,
                                   const int64_t* shape, int64_t* out) {
  if (t.ndim > ndim) return false;
  const int offset = ndim - t.ndim;
  for (int d = 0; d < ndim; ++d) {
    if (d < offset) {
      out[d] = 0;
      continue;
    }
    const int64_t size = t.shape[d - offset];
    if (size == shape[d]) {
      out[d] = t.strides[d - offset] * static_cast<int64_t>(elem_size);
    } else if (size == 1) {
      out[d] = 0;
    } else {
      return false;
    }
  }
  return true;
}

// Byte strides of `t` over its own shape.
inline void byte_strides(const gk_plugin_tensor& t, size_t elem_size, int64_t* out) {
  for (int d = 0; d < t.ndim; ++d) out[d] = t.strides[d] * static_cast<int64_t>(elem_size);
}

// ----------------------------------------------------------------------------------------
// Element types.

template <class T>
struct DtypeTraits;
template <>
struct DtypeTraits<float> {
  static constexpr int32_t kDtype = GK_DTYPE_F32;
  using Compute = float;
};
template <>
struct DtypeTraits<double> {
  static constexpr int32_t kDtype = GK_DTYPE_F64;
  using Compute = double;
};
template <>
struct DtypeTraits<Half> {
  static constexpr int32_t kDtype = GK_DTYPE_F16;
  using Compute = float;
};
template <>
struct DtypeTraits<BFloat16> {
  static constexpr int32_t kDtype = GK_DTYPE_BF16;
  using Compute = float;
};
template <>
struct DtypeTraits<int8_t> {
  static constexpr int32_t kDtype = GK_DTYPE_I8;
  using Compute = int8_t;
};
template <>
struct DtypeTraits<int16_t> {
  static constexpr int32_t kDtype = GK_DTYPE_I16;
  using Compute = int16_t;
};
template <>
struct DtypeTraits<int32_t> {
  static constexpr int32_t kDtype = GK_DTYPE_I32;
  using Compute = int32_t;
};
template <>
struct DtypeTraits<int64_t> {
  static constexpr int32_t kDtype = GK_DTYPE_I64;
  using Compute = int64_t;
};
template <>
struct DtypeTraits<uint8_t> {
  static constexpr int32_t kDtype = GK_DTYPE_U8;
  using Compute = uint8_t;
};

// The type arithmetic on T happens in: f32 for f16/bf16, else T itself.
template <class T>
using compute_t = typename DtypeTraits<T>::Compute;

template <class T>
inline constexpr bool kIsFloating =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class T>
inline compute_t<T> load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::is_same_v<T, Half>) {
    return half_bits_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bf16_bits_to_float(v.bits);
  } else {
    return v;
  }
}

template <class T, class C>
inline void store(char* p, C value) {
  T v;
  if constexpr (std::is_same_v<T, Half>) {
    v.bits = float_to_half_bits(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    v.bits = float_to_bf16_bits(static_cast<float>(value));
  } else {
    v = static_cast<T>(value);
  }
  std::memcpy(p, &v, sizeof(T));
}

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) for a floating dtype, fallback() for any other.
template <class F, class Fallback>
auto visit_floating(int32_t dtype, F&& f, Fallback&& fallback) {
  switch (dtype) {
    case GK_DTYPE_F32:
      return f(TypeTag<float>{});
    case GK_DTYPE_F64:
      return f(TypeTag<double>{});
    case GK_DTYPE_F16:
      return f(TypeTag<Half>{});
    case GK_DTYPE_BF16:
      return f(TypeTag<BFloat16>{});
    default:
      return fallback();
  }
}

// Floating dtypes plus every integer dtype the ops use (i8 i16 i32 i64 u8).
template <class F, class Fallback>
auto visit_numeric(int32_t dtype, F&& f, Fallback&& fallback) {
  switch (dtype) {
    case GK_DTYPE_I8:
      return f(TypeTag<int8_t>{});
    case GK_DTYPE_I16:
      return f(TypeTag<int16_t>{});
    case GK_DTYPE_I32:
      return f(TypeTag<int32_t>{});
    case GK_DTYPE_I64:
      return f(TypeTag<int64_t>{});
    case GK_DTYPE_U8:
      return f(TypeTag<uint8_t>{});
    default:
      return visit_floating(dtype, f, fallback);
  }
}

}  // namespace gk::cpu

#endif  // GPUKIT_PLUGINS_CPU_STRIDED_ITER_H_
