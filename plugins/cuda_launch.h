// Shared by the CUDA plugins whose launches need scratch memory and report CUDA errors as a
// status (reductions_cuda, llm_cuda): what one launch needs besides its arguments.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpukit/gpukit_plugin.h"

namespace gk::plugins {

// Owns the scratch it hands out and returns it to the host pool, stream-ordered, when
// destroyed.
class LaunchContext {
 public:
  LaunchContext(const gk_host_services* host, const gk_kernel_args* args)
      : host_(host), args_(args), stream_(static_cast<cudaStream_t>(args->stream)) {}
  ~LaunchContext() {
    if (ws_ != nullptr) host_->free(host_->host_context, args_->device, ws_, args_->stream);
  }
  LaunchContext(const LaunchContext&) = delete;
  LaunchContext& operator=(const LaunchContext&) = delete;

  cudaStream_t stream() const { return stream_; }

  // Scratch of `bytes` (NULL for 0) valid for this launch's stream work; one per launch.
  gk_status workspace(size_t bytes, void** out) {
    *out = nullptr;
    if (bytes == 0) return GK_OK;
    const gk_status st =
        host_->alloc(host_->host_context, args_->device, bytes, args_->stream, &ws_);
    if (st != GK_OK) {
      report(std::string(args_->op) + ": scratch of " + std::to_string(bytes) +
             " bytes for partial results could not be allocated");
      ws_ = nullptr;
      return st;
    }
    *out = ws_;
    return GK_OK;
  }

  // Reports `what` failing with `err` for this op; returns GK_INTERNAL.
  gk_status cuda_error(const char* what, cudaError_t err) const {
    report(std::string(args_->op) + ": " + what + " failed: " + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")");
    return GK_INTERNAL;
  }
  gk_status check(cudaError_t err, const char* what) const {
    return err == cudaSuccess ? GK_OK : cuda_error(what, err);
  }

 private:
  void report(const std::string& message) const {
    host_->report_error(host_->host_context, message.c_str());
  }

  const gk_host_services* host_;
  const gk_kernel_args* args_;
  cudaStream_t stream_;
  void* ws_ = nullptr;
};

}  // namespace gk::plugins
