// matmul_gemv plugin: skinny bf16/f16 matmul (one row, weights K-contiguous) through
// kernels/matmul/gemv.cu, on any SM from 80 up; it declines every other product, which then
// goes to cuBLASLt or the GEMM plugins.
#include <cuda_runtime.h>

#include <string>

#include "cuda_device_guard.h"
#include "gemv.cuh"
#include "gpukit/gpukit_plugin.hpp"
#include "matmul_call.h"

namespace {

struct MatmulGemv {
  static constexpr const char* kName = "matmul_gemv";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;

  explicit MatmulGemv(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    gk_plugin_device dev;
    const gk::matmul::MatmulProblem p = gk::plugins::matmul_call(host, args, 80, 999, &dev);
    return gk::matmul::gemv_can_implement(p, why);
  }

  void launch(const gk_kernel_args& args) const {
    gk_plugin_device dev;
    const gk::matmul::MatmulProblem p = gk::plugins::matmul_call(host, args, 80, 999, &dev);
    std::string why;
    if (!gk::matmul::gemv_can_implement(p, &why)) gk::plugin::fail(GK_INVALID_ARGUMENT, why);
    gk::plugins::DeviceGuard guard;
    gk::plugins::check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    gk::plugins::check_cuda(gk::matmul::gemv_run(p, dev.sm_count,
                                                 static_cast<cudaStream_t>(args.stream)),
                            "gemv");
  }
};

}  // namespace

GK_PLUGIN_DEFINE(MatmulGemv)
