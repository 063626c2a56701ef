// Scalar math of the elementwise ops, shared with matmul's fused activation.
//
// C is the compute type: float (f32, f16, bf16), double, or an integer type. Integer
// arithmetic wraps modulo 2^bits like NumPy: it is done in unsigned types of at least 32
// bits, where overflow is defined, and converted back (modular since C++20).
#ifndef GPUKIT_PLUGINS_CPU_ELEMENTWISE_MATH_H_
#define GPUKIT_PLUGINS_CPU_ELEMENTWISE_MATH_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace gk::cpu {

enum class BinaryKind { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow };
enum class UnaryKind {
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kRelu,
  kGelu,
  kGeluTanh,
  kSilu
};

template <class C>
using wrap_t = std::conditional_t<sizeof(C) <= 4, uint32_t, uint64_t>;

template <BinaryKind K, class C>
inline C binary_apply(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (K == BinaryKind::kAdd) return a + b;
    if constexpr (K == BinaryKind::kSub) return a - b;
    if constexpr (K == BinaryKind::kMul) return a * b;
    if constexpr (K == BinaryKind::kDiv) return a / b;
    if constexpr (K == BinaryKind::kPow) return std::pow(a, b);
    // a + b is NaN when either is NaN, the NumPy result.
    if constexpr (K == BinaryKind::kMaximum) {
      return std::isnan(a) || std::isnan(b) ? a + b : (a < b ? b : a);
    }
    if constexpr (K == BinaryKind::kMinimum) {
      return std::isnan(a) || std::isnan(b) ? a + b : (b < a ? b : a);
    }
  } else {
    using U = wrap_t<C>;
    if constexpr (K == BinaryKind::kAdd) return static_cast<C>(U(a) + U(b));
    if constexpr (K == BinaryKind::kSub) return static_cast<C>(U(a) - U(b));
    if constexpr (K == BinaryKind::kMul) return static_cast<C>(U(a) * U(b));
    if constexpr (K == BinaryKind::kMaximum) return a < b ? b : a;
    if constexpr (K == BinaryKind::kMinimum) return b < a ? b : a;
    // div and pow serve floating dtypes only (checked before dispatch).
    if constexpr (K == BinaryKind::kDiv || K == BinaryKind::kPow) return C{};
  }
}

template <class C>
inline C gelu_erf(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
}

template <class C>
inline C gelu_tanh(C x) {
  const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
  return C(0.5) * x * (C(1) + std::tanh(inner));
}

template <class C>
inline C silu(C x) {
  return x / (C(1) + std::exp(-x));
}

template <class C>
inline C relu(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return x > C(0) || std::isnan(x) ? x : C(0);  // NaN stays NaN
  } else {
    return x > C(0) ? x : C(0);
  }
}

template <UnaryKind K, class C>
inline C unary_apply(C x) {
  if constexpr (K == UnaryKind::kRelu) return relu(x);
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (K == UnaryKind::kNeg) return -x;
    if constexpr (K == UnaryKind::kAbs) return std::abs(x);
    if constexpr (K == UnaryKind::kExp) return std::exp(x);
    if constexpr (K == UnaryKind::kLog) return std::log(x);
    if constexpr (K == UnaryKind::kSqrt) return std::sqrt(x);
    if constexpr (K == UnaryKind::kRsqrt) return C(1) / std::sqrt(x);
    if constexpr (K == UnaryKind::kTanh) return std::tanh(x);
    if constexpr (K == UnaryKind::kSigmoid) return C(1) / (C(1) + std::exp(-x));
    if constexpr (K == UnaryKind::kGelu) return gelu_erf(x);
    if constexpr (K == UnaryKind::kGeluTanh) return gelu_tanh(x);
    if constexpr (K == UnaryKind::kSilu) return silu(x);
  } else {
    using U = wrap_t<C>;
    // The most negative value negates to itself, as in NumPy.
    if constexpr (K == UnaryKind::kNeg) return static_cast<C>(U(0) - U(x));
    if constexpr (K == UnaryKind::kAbs) return x < 0 ? static_cast<C>(U(0) - U(x)) : x;
    if constexpr (K != UnaryKind::kNeg && K != UnaryKind::kAbs && K != UnaryKind::kRelu) {
      return C{};  // floating-only ops; integer dtypes are declined before dispatch
    }
  }
}

}  // namespace gk::cpu

#endif  // GPUKIT_PLUGINS_CPU_ELEMENTWISE_MATH_H_
