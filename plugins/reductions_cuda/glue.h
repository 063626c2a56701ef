// Glue between the plugin ABI (gk_kernel_args) and the reductions kernels: tensor
// conversion, attribute parsing, scratch memory and CUDA error reporting. One
// *_glue.cpp per op family implements serves/supports/launch with these helpers.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gpukit/gpukit_plugin.h"
#include "reductions/common.cuh"

namespace gk::plugins::reductions_cuda {

namespace kr = gk::kernels::reductions;

// What one launch needs besides its arguments. Owns the scratch it hands out and
// returns it to the host pool, stream-ordered, when destroyed.
class LaunchContext {
 public:
  LaunchContext(const gk_host_services* host, const gk_kernel_args* args)
      : host_(host), args_(args), stream_(static_cast<cudaStream_t>(args->stream)) {}
  ~LaunchContext();
  LaunchContext(const LaunchContext&) = delete;
  LaunchContext& operator=(const LaunchContext&) = delete;

  cudaStream_t stream() const { return stream_; }
  // Scratch of `bytes` (NULL for 0) valid for this launch's stream work.
  gk_status workspace(size_t bytes, void** out);
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

// gk_dtype → kernel dtype; false for dtypes no kernel here handles.
bool map_dtype(int32_t dtype, kr::DType* out);
const char* dtype_name(int32_t dtype);

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
