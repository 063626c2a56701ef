// matmul_sm80 plugin: bf16/f16, and f32 with precision "tf32", through sm80_gemm_mma
// (mma.sync tensor cores); full f32 and f64 through simt_gemm; on any SM from 80 up.
#include <cuda_runtime.h>

#include <string>

#include "cuda_device_guard.h"
#include "gpukit/gpukit_plugin.hpp"
#include "matmul_call.h"
#include "simt_gemm.cuh"
#include "sm80_gemm_mma.cuh"

namespace {

using gk::matmul::MatmulProblem;

// Tensor cores for 16-bit inputs, and for f32 only where the caller accepted tf32 rounding.
bool uses_mma(const MatmulProblem& p) {
  return p.in_dtype == GK_DTYPE_BF16 || p.in_dtype == GK_DTYPE_F16 ||
         (p.in_dtype == GK_DTYPE_F32 && p.allow_tf32);
}

struct MatmulSm80 {
  static constexpr const char* kName = "matmul_sm80";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;

  explicit MatmulSm80(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    gk_plugin_device dev;
    const MatmulProblem p = gk::plugins::matmul_call(host, args, 80, 999, &dev);
    return uses_mma(p) ? gk::matmul::sm80_gemm_can_implement(p, why)
                       : gk::matmul::simt_gemm_can_implement(p, why);
  }

  void launch(const gk_kernel_args& args) const {
    gk_plugin_device dev;
    const MatmulProblem p = gk::plugins::matmul_call(host, args, 80, 999, &dev);
    const cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
    gk::plugins::DeviceGuard guard;
    gk::plugins::check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    gk::plugins::check_cuda(uses_mma(p) ? gk::matmul::sm80_gemm_run(p, stream)
                                        : gk::matmul::simt_gemm_run(p, stream),
                            uses_mma(p) ? "sm80_gemm" : "simt_gemm");
  }
};

}  // namespace

GK_PLUGIN_DEFINE(MatmulSm80)
