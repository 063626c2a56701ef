// Glue between the plugin ABI (gk_kernel_args) and the llm kernels: tensor conversion,
// attribute reading (kernels/llm/llm_params.h, as the core's rules read them) and CUDA error
// reporting.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"
#include "cuda_launch.h"
#include "llm/common.cuh"

namespace gk::plugins::llm_cuda {

namespace kl = gk::kernels::llm;

using gk::plugins::LaunchContext;  // plugins/cuda_launch.h

bool llm_serves(const char* op);
// Accept or decline (with `why` naming op, argument and value).
bool llm_supports(const gk_kernel_args* args, std::string* why);
gk_status llm_launch(const gk_kernel_args* args, LaunchContext& ctx);

}  // namespace gk::plugins::llm_cuda
