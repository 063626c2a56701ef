// reductions_cuda: reductions, softmax, norms, elementwise and cast on CUDA SM 80+, a
// plugin SDK class (gpukit_plugin.hpp). CUDA runs on the device's primary context through
// the statically linked runtime.
#include <cuda_runtime_api.h>

#include <string>

#include "cuda_device_guard.h"
#include "glue.h"
#include "gpukit/gpukit_plugin.hpp"

namespace gk::plugins::reductions_cuda {
namespace {

struct Family {
  bool (*serves)(const char*);
  bool (*supports)(const gk_kernel_args*, std::string*);
  gk_status (*launch)(const gk_kernel_args*, LaunchContext&);
};

constexpr Family kFamilies[] = {
    {elementwise_serves, elementwise_supports, elementwise_launch},
    {reduce_serves, reduce_supports, reduce_launch},
    {softmax_serves, softmax_supports, softmax_launch},
    {norm_serves, norm_supports, norm_launch},
};

const Family* family_of(const char* op) {
  if (op == nullptr) return nullptr;
  for (const auto& f : kFamilies)
    if (f.serves(op)) return &f;
  return nullptr;
}

struct ReductionsCuda {
  static constexpr const char* kName = "reductions_cuda";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;

  explicit ReductionsCuda(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    const Family* f = family_of(args.op);
    if (f == nullptr) {
      *why = std::string(args.op) + ": op is not served by reductions_cuda";
      return false;
    }
    return f->supports(&args, why);
  }

  void launch(const gk_kernel_args& args) const {
    const Family* f = family_of(args.op);
    if (f == nullptr) gk::plugin::fail(GK_UNIMPLEMENTED, "not served by reductions_cuda");
    const gk_plugin_device dev = gk::plugin::call_device(host, args);
    LaunchContext ctx(host, &args);
    DeviceGuard guard;
    check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    // The family's launch reports its own errors through ctx.
    const gk_status st = f->launch(&args, ctx);
    if (st != GK_OK) gk::plugin::fail(st, "");
  }
};

}  // namespace
}  // namespace gk::plugins::reductions_cuda

GK_PLUGIN_DEFINE(gk::plugins::reductions_cuda::ReductionsCuda)
