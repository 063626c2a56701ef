// Glue between the plugin ABI (gk_kernel_args) and the reductions kernels: tensor
// conversion, attribute parsing, scratch memory and CUDA error reporting. One
// *_glue.cpp per op family implements serves/supports/launch with these helpers.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"
#include "cuda_launch.h"
#include "reductions/common.cuh"

namespace gk::plugins::reductions_cuda {

namespace kr = gk::kernels::reductions;

using gk::plugins::LaunchContext;  // plugins/cuda_launch.h

// gk_dtype → kernel dtype; false for dtypes no kernel here handles.
bool map_dtype(int32_t dtype, kr::DType* out);
using gk::plugin::dtype_name;  // the SDK's table (gpukit_plugin.hpp)

// Converts tensor `arg` of the call; on failure `why` names the op, argument and value.
bool to_ref(const gk_kernel_args* args, const gk_plugin_tensor& t, const char* arg,
            kr::TensorRef* out, std::string* why);

// String attribute or `fallback`.
const char* attr_string(const gk_kernel_args* args, const char* name, const char* fallback);

// Per family: does it serve `op`; accept/decline; launch.
bool elementwise_serves(const char* op);
bool elementwise_supports(const gk_kernel_args* args, std::string* why);
gk_status elementwise_launch(const gk_kernel_args* args, LaunchContext& ctx);

bool reduce_serves(const char* op);
bool reduce_supports(const gk_kernel_args* args, std::string* why);
gk_status reduce_launch(const gk_kernel_args* args, LaunchContext& ctx);

bool softmax_serves(const char* op);
bool softmax_supports(const gk_kernel_args* args, std::string* why);
gk_status softmax_launch(const gk_kernel_args* args, LaunchContext& ctx);

bool norm_serves(const char* op);
bool norm_supports(const gk_kernel_args* args, std::string* why);
gk_status norm_launch(const gk_kernel_args* args, LaunchContext& ctx);

}  // namespace gk::plugins::reductions_cuda
