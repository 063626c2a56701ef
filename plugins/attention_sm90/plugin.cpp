// attention_sm90: the attention op's prefill on Hopper through kernels/llm/attention_sm90.cu
// (wgmma), a plugin SDK class. It declines, with the reason, what the kernel does not take;
// dispatch then falls through to llm_cuda.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "call_args.h"
#include "cuda_device_guard.h"
#include "cuda_launch.h"
#include "gpukit/gpukit_plugin.hpp"
#include "llm/attention_sm90.cuh"

namespace gk::plugins::attention_sm90 {
namespace {

namespace kl = gk::kernels::llm;
using llm_cuda::AttentionCall;

bool resolve(const gk_kernel_args& args, AttentionCall* c, std::string* why) {
  if (std::strcmp(args.op, "attention") != 0) {
    *why = std::string(args.op) + ": op is not served by attention_sm90";
    return false;
  }
  if (!llm_cuda::resolve_attention(&args, c, why)) return false;
  if (c->table.data != nullptr || args.num_inputs == 5) {
    *why = "attention: a paged cache (block_table) is served by llm_cuda";
    return false;
  }
  const std::string refusal = kl::attention_sm90_refusal(c->q, c->k, c->v);
  if (!refusal.empty()) {
    *why = "attention: " + refusal;
    return false;
  }
  return true;
}

struct AttentionSm90 {
  static constexpr const char* kName = "attention_sm90";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;

  explicit AttentionSm90(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    AttentionCall c;
    return resolve(args, &c, why);
  }

  void launch(const gk_kernel_args& args) const {
    AttentionCall c;
    std::string why;
    if (!resolve(args, &c, &why)) gk::plugin::fail(GK_INVALID_ARGUMENT, why);
    const gk_plugin_device dev = gk::plugin::call_device(host, args);
    LaunchContext ctx(host, &args);
    DeviceGuard guard;
    check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    const gk_status st =
        ctx.check(kl::launch_attention_sm90(c.q, c.k, c.v, c.lengths, c.out, float(c.p.scale),
                                            c.p.causal, ctx.stream()),
                  "attention_sm90 kernel launch");
    if (st != GK_OK) gk::plugin::fail(st, "");
  }
};

}  // namespace
}  // namespace gk::plugins::attention_sm90

GK_PLUGIN_DEFINE(gk::plugins::attention_sm90::AttentionSm90)
