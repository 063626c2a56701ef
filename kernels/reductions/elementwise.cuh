// Elementwise ops of the reductions family: unary, binary with broadcasting, comparisons,
// gated activations (swiglu, geglu) and cast. Host launch wrappers; device code in
// elementwise.cu.
#pragma once

#include <string>

#include "common.cuh"

namespace gk::kernels::reductions {

enum class UnaryOp : int {
  neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, gelu_erf, gelu_tanh, silu
};

// swiglu/geglu take (gate, up) as (a, b).
enum class BinaryOp : int {
  add, sub, mul, div, maximum, minimum, pow, swiglu, geglu_erf, geglu_tanh
};

// x and out share a shape; dtypes f32/f16/bf16, equal.
bool can_implement_unary(UnaryOp op, const TensorRef& x, const TensorRef& out, std::string* why);
cudaError_t launch_unary(UnaryOp op, const TensorRef& x, const TensorRef& out, cudaStream_t stream);

// a and b broadcast (NumPy, right-aligned) to out's shape; one dtype f32/f16/bf16.
bool can_implement_binary(BinaryOp op, const TensorRef& a, const TensorRef& b,
                          const TensorRef& out, std::string* why);
cudaError_t launch_binary(BinaryOp op, const TensorRef& a, const TensorRef& b,
                          const TensorRef& out, cudaStream_t stream);

// a == b, a != b, a < b, a <= b, a > b, a >= b; out is bool (one byte, 0 or 1).
enum class CompareOp : int { eq, ne, lt, le, gt, ge };

// a and b of one dtype (f32/f16/bf16/i32/i64) broadcast (NumPy, right-aligned) to out's
// shape; out dtype b8. NaN compares false except for ne.
bool can_implement_compare(CompareOp op, const TensorRef& a, const TensorRef& b,
                           const TensorRef& out, std::string* why);
cudaError_t launch_compare(CompareOp op, const TensorRef& a, const TensorRef& b,
                           const TensorRef& out, cudaStream_t stream);

// Any pair of f32/f16/bf16/i32. Float to int truncates toward zero, saturates at the
// i32 range, and NaN becomes 0.
bool can_implement_cast(const TensorRef& x, const TensorRef& out, std::string* why);
cudaError_t launch_cast(const TensorRef& x, const TensorRef& out, cudaStream_t stream);

}  // namespace gk::kernels::reductions
