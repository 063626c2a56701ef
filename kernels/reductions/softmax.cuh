// softmax and log_softmax over any axis. Host launch wrappers; device code in
// softmax.cu.
#pragma once

#include <string>

#include "common.cuh"

namespace gk::kernels::reductions {

// x and out share shape and dtype (f32/f16/bf16); axis in [0, ndim).
bool can_implement_softmax(const TensorRef& x, int axis, const TensorRef& out, std::string* why);

// Scratch: packed copies of x and out with the axis last where its stride is not 1, and
// chunk statistics for rows longer than the register-cached limit (0 when neither is
// needed).
size_t softmax_workspace_bytes(const TensorRef& x, int axis, const TensorRef& out);

cudaError_t launch_softmax(const TensorRef& x, int axis, bool log, const TensorRef& out,
                           void* workspace, cudaStream_t stream);

}  // namespace gk::kernels::reductions
