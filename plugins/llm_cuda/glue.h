// Glue between the plugin ABI (gk_kernel_args) and the llm kernels: tensor conversion,
// attribute reading (kernels/llm/llm_params.h, as the core's rules read them) and CUDA error
// reporting.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpukit/gpukit_plugin.h"
#include "llm/common.cuh"

namespace gk::plugins::llm_cuda {

namespace kl = gk::kernels::llm;

// What one launch needs besides its arguments. Owns the scratch it hands out and returns it
// to the host pool, stream-ordered, when destroyed.
class LaunchContext {
 public:
  LaunchContext(const gk_host_services* host, const gk_kernel_args* args)
      : host_(host), args_(args), stream_(static_cast<cudaStream_t>(args->stream)) {}
  ~LaunchContext();
  LaunchContext(const LaunchContext&) = delete;
  LaunchContext& operator=(const LaunchContext&) = delete;

  // Scratch of `bytes` (NULL for 0) valid for this launch's stream work.
  gk_status workspace(size_t bytes, void** out);

  cudaStream_t stream() const { return stream_; }
  // Reports `what` failing with `err` for this op; returns GK_INTERNAL.
  gk_status cuda_error(const char* what, cudaError_t err) const;
  gk_status check(cudaError_t err, const char* what) const {
    return err == cudaSuccess ? GK_OK : cuda_error(what, err);
  }

 private:
  const gk_host_services* host_;
  const gk_kernel_args* args_;
  cudaStream_t stream_;
  void* ws_ = nullptr;
};

bool llm_serves(const char* op);
// Accept or decline (with `why` naming op, argument and value).
bool llm_supports(const gk_kernel_args* args, std::string* why);
gk_status llm_launch(const gk_kernel_args* args, LaunchContext& ctx);

}  // namespace gk::plugins::llm_cuda
