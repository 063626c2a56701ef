// Shared by the CUDA plugins (asr_cuda, llm_cuda, reductions_cuda): makes a call's device
// current for the calling thread and restores the previous one when it goes out of scope,
// so the caller's cudart state is left as found.
#pragma once

#include <cuda_runtime_api.h>

namespace gk::plugins {

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
