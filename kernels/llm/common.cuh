// Host-side types of the llm kernel family, safe to include from plain C++ (the plugin
// glue): strided views and dtypes. No GPUkit policy lives here: views are raw pointers with
// shapes and strides in elements, and every host wrapper returns a cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace gk::kernels::llm {

inline constexpr int kMaxDims = 8;

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, i64 = 4 };

// A strided tensor: element [i0..in] lives at data + sum(i_d * strides[d]) elements.
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

}  // namespace gk::kernels::llm
