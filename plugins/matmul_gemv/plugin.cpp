// matmul_gemv plugin: skinny bf16/f16 matmul (one row, weights K-contiguous) through
// kernels/matmul/gemv.cu, and matmul with a block-quantized weight (q8_0, q4_0, q4_1, q4_k,
// read packed, any M) through kernels/matmul/gemv_quant.cu, on any SM from 80 up; it declines
// every other product, which then goes to cuBLASLt or the GEMM plugins.
#include <cuda_runtime.h>

#include <string>

#include "cuda_device_guard.h"
#include "gemv.cuh"
#include "gemv_quant.cuh"
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
    return can_implement(p, why);
  }

  static bool packed(const gk::matmul::MatmulProblem& p) { return p.b_dtype != p.in_dtype; }

  static bool can_implement(const gk::matmul::MatmulProblem& p, std::string* why) {
    return packed(p) ? gk::matmul::gemv_quant_can_implement(p, why)
                     : gk::matmul::gemv_can_implement(p, why);
  }

  void launch(const gk_kernel_args& args) const {
    gk_plugin_device dev;
    const gk::matmul::MatmulProblem p = gk::plugins::matmul_call(host, args, 80, 999, &dev);
    std::string why;
    if (!can_implement(p, &why)) gk::plugin::fail(GK_INVALID_ARGUMENT, why);
    gk::plugins::DeviceGuard guard;
    gk::plugins::check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    const cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
    if (packed(p)) {
      gk::plugins::check_cuda(gk::matmul::gemv_quant_run(p, dev.sm_count, stream), "gemv_quant");
    } else {
      gk::plugins::check_cuda(gk::matmul::gemv_run(p, dev.sm_count, stream), "gemv");
    }
  }
};

}  // namespace

GK_PLUGIN_DEFINE(MatmulGemv)
