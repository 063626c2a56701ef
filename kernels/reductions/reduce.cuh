// Reductions over any set of axes: sum, mean, prod, max, min, argmax, argmin.
// Host launch wrappers; device code in reduce.cu.
#pragma once

#include <string>

#include "common.cuh"

namespace gk::kernels::reductions {

enum class ReduceOp : int { sum, mean, prod, max, min, argmax, argmin };

// `axes_mask` bit d set = dim d of x is reduced. `out` has either x's rank (reduced
// dims kept as 1) or only the kept dims, in order. x: f32/f16/bf16; out: x's dtype,
// i64 for argmax/argmin.
bool can_implement_reduce(ReduceOp op, const TensorRef& x, uint32_t axes_mask,
                          const TensorRef& out, std::string* why);

// Scratch for the partials of a split reduction (0 when the call needs none).
size_t reduce_workspace_bytes(ReduceOp op, const TensorRef& x, uint32_t axes_mask,
                              const TensorRef& out);

// `workspace` holds reduce_workspace_bytes() bytes, device memory, stream-ordered.
cudaError_t launch_reduce(ReduceOp op, const TensorRef& x, uint32_t axes_mask,
                          const TensorRef& out, void* workspace, cudaStream_t stream);

}  // namespace gk::kernels::reductions
