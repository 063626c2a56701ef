// llm_cuda: the llm ops (embedding, rope, attention, sample) on CUDA SM 80+, a plugin SDK
// class (gpukit_plugin.hpp). CUDA runs on the device's primary context through the
// statically linked runtime.
#include <cuda_runtime_api.h>

#include <string>

#include "cuda_device_guard.h"
#include "glue.h"
#include "gpukit/gpukit_plugin.hpp"

namespace gk::plugins::llm_cuda {
namespace {

struct LlmCuda {
  static constexpr const char* kName = "llm_cuda";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;

  explicit LlmCuda(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    if (!llm_serves(args.op)) {
      *why = std::string(args.op) + ": op is not served by llm_cuda";
      return false;
    }
    return llm_supports(&args, why);
  }

  void launch(const gk_kernel_args& args) const {
    if (!llm_serves(args.op)) gk::plugin::fail(GK_UNIMPLEMENTED, "not served by llm_cuda");
    const gk_plugin_device dev = gk::plugin::call_device(host, args);
    LaunchContext ctx(host, &args);
    DeviceGuard guard;
    check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    // llm_launch reports its own errors through ctx.
    const gk_status st = llm_launch(&args, ctx);
    if (st != GK_OK) gk::plugin::fail(st, "");
  }
};

}  // namespace
}  // namespace gk::plugins::llm_cuda

GK_PLUGIN_DEFINE(gk::plugins::llm_cuda::LlmCuda)
