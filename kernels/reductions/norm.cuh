// layernorm, rmsnorm and their residual-add forms, over the last axis. Host launch
// wrappers; device code in norm.cu.
#pragma once

#include <string>

#include "common.cuh"

namespace gk::kernels::reductions {

struct NormArgs {
  TensorRef x;
  const TensorRef* residual = nullptr;  // add_*: sum = x + residual, normalised
  const TensorRef* weight = nullptr;    // [H]
  const TensorRef* bias = nullptr;      // [H], layernorm only
  TensorRef out;
  const TensorRef* sum = nullptr;       // add_*: x + residual, written
  float eps = 1e-5f;
  bool rms = false;
};

bool can_implement_norm(const NormArgs& a, std::string* why);

// Scratch: packed copies of the operands whose last-axis stride is not 1, and chunk
// statistics for rows longer than the register-cached limit (0 when neither is needed).
size_t norm_workspace_bytes(const NormArgs& a);

cudaError_t launch_norm(const NormArgs& a, void* workspace, cudaStream_t stream);

}  // namespace gk::kernels::reductions
