// matmul_sm90 plugin: bf16/f16/tf32 matmul on Hopper through sm90_gemm_tma_ws (wgmma + TMA).
#include <cuda_runtime.h>

#include <string>

#include "cuda_device_guard.h"
#include "gpukit/gpukit_plugin.hpp"
#include "matmul_call.h"
#include "sm90_gemm_tma_ws.cuh"

namespace {

using gk::matmul::MatmulProblem;

// The driver's tensor-map encoder, which TMA descriptors need (driver 12.0+).
gk::matmul::TensorMapEncodeFn tensor_map_encoder(const gk_host_services* host) {
  void* fn = nullptr;
  if (host->cuda_driver_symbol(host->host_context, "cuTensorMapEncodeTiled", &fn) != GK_OK ||
      !fn) {
    gk::plugin::fail(GK_UNAVAILABLE, "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs 12.0+)");
  }
  return reinterpret_cast<gk::matmul::TensorMapEncodeFn>(fn);
}

struct MatmulSm90 {
  static constexpr const char* kName = "matmul_sm90";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;
  gk::matmul::TensorMapEncodeFn encode;

  explicit MatmulSm90(const gk_host_services* h) : host(h), encode(tensor_map_encoder(h)) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    gk_plugin_device dev;
    const MatmulProblem p = gk::plugins::matmul_call(host, args, 90, 90, &dev);
    return gk::matmul::sm90_gemm_can_implement(p, encode, why);
  }

  void launch(const gk_kernel_args& args) const {
    gk_plugin_device dev;
    const MatmulProblem p = gk::plugins::matmul_call(host, args, 90, 90, &dev);
    gk::plugins::DeviceGuard guard;
    gk::plugins::check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    std::string why;
    const cudaError_t err = gk::matmul::sm90_gemm_run(p, encode, dev.sm_count,
                                                      static_cast<cudaStream_t>(args.stream), &why);
    gk::plugins::check_cuda(err, "sm90_gemm", why);
  }
};

}  // namespace

GK_PLUGIN_DEFINE(MatmulSm90)
