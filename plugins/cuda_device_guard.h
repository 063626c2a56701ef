// Shared by the CUDA plugins: DeviceGuard makes a call's device current for the calling
// thread and restores the previous one when it goes out of scope, so the caller's cudart
// state is left as found; check_cuda turns a CUDA error into the plugin SDK's Failure.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpukit/gpukit_plugin.hpp"

namespace gk::plugins {

// Throws GK_INTERNAL naming `what` and the CUDA error (or `why`, when the caller knows more).
inline void check_cuda(cudaError_t err, const char* what, const std::string& why = "") {
  if (err != cudaSuccess) {
    gk::plugin::fail(GK_INTERNAL,
                     std::string(what) + ": " + (why.empty() ? cudaGetErrorString(err) : why));
  }
}

class DeviceGuard {
 public:
  DeviceGuard() = default;
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  cudaError_t enter(int ordinal) {
    cudaError_t err = cudaGetDevice(&previous_);
    if (err != cudaSuccess) return err;
    if (previous_ == ordinal) return cudaSuccess;
    err = cudaSetDevice(ordinal);
    switched_ = err == cudaSuccess;
    return err;
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace gk::plugins
