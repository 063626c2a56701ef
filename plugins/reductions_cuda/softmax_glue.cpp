// Glue for softmax and log_softmax.
#include <cstring>

#include "glue.h"
#include "reductions/softmax.cuh"

namespace gk::plugins::reductions_cuda {
namespace {

struct Call {
  kr::TensorRef x, out;
  int axis = 0;
  bool log = false;
};

bool resolve(const gk_kernel_args* args, Call* c, std::string* why) {
  c->log = std::strcmp(args->op, "log_softmax") == 0;
  if (args->num_inputs < 1 || args->num_outputs < 1) {
    *why = std::string(args->op) + ": missing x or out";
    return false;
  }
  if (!to_ref(args, args->inputs[0], "x", &c->x, why)) return false;
  if (!to_ref(args, args->outputs[0], "out", &c->out, why)) return false;
  // Non-negative and in range: the core's op rules normalised it (gpukit_plugin.h).
  c->axis = static_cast<int>(gk_attr_int(args, "axis", c->x.ndim - 1));
  if (!kr::can_implement_softmax(c->x, c->axis, c->out, why)) {
    *why = std::string(args->op) + ": " + *why;
    return false;
  }
  return true;
}

}  // namespace

bool softmax_serves(const char* op) {
  return std::strcmp(op, "softmax") == 0 || std::strcmp(op, "log_softmax") == 0;
}

bool softmax_supports(const gk_kernel_args* args, std::string* why) {
  Call c;
  return resolve(args, &c, why);
}

gk_status softmax_launch(const gk_kernel_args* args, LaunchContext& ctx) {
  Call c;
  std::string why;
  if (!resolve(args, &c, &why)) return ctx.cuda_error(why.c_str(), cudaErrorInvalidValue);
  void* ws = nullptr;
  const gk_status st = ctx.workspace(kr::softmax_workspace_bytes(c.x, c.axis, c.out), &ws);
  if (st != GK_OK) return st;
  return ctx.check(kr::launch_softmax(c.x, c.axis, c.log, c.out, ws, ctx.stream()),
                   "softmax kernel launch");
}

}  // namespace gk::plugins::reductions_cuda
