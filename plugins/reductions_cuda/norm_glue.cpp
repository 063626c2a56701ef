// Glue for layernorm, rmsnorm, add_layernorm, add_rmsnorm.
#include <cstring>

#include "glue.h"
#include "reductions/norm.cuh"

namespace gk::plugins::reductions_cuda {
namespace {

struct Call {
  kr::NormArgs a;
  kr::TensorRef residual, weight, bias, sum;
};

bool resolve(const gk_kernel_args* args, Call* c, std::string* why) {
  const char* op = args->op;
  const bool add = std::strncmp(op, "add_", 4) == 0;
  c->a.rms = std::strstr(op, "rmsnorm") != nullptr;
  const int need_in = add ? 3 : 1, need_out = add ? 2 : 1;
  if (args->num_inputs < need_in || args->num_outputs < need_out) {
    *why = std::string(op) + ": expects " + std::to_string(need_in) + "+ inputs and " +
           std::to_string(need_out) + " outputs";
    return false;
  }
  if (!to_ref(args, args->inputs[0], "x", &c->a.x, why)) return false;
  if (!to_ref(args, args->outputs[0], "out", &c->a.out, why)) return false;
  int next = 1;
  if (add) {
    if (!to_ref(args, args->inputs[next++], "residual", &c->residual, why)) return false;
    if (!to_ref(args, args->outputs[1], "sum", &c->sum, why)) return false;
    c->a.residual = &c->residual;
    c->a.sum = &c->sum;
  }
  if (args->num_inputs > next) {
    if (!to_ref(args, args->inputs[next++], "weight", &c->weight, why)) return false;
    c->a.weight = &c->weight;
  }
  if (args->num_inputs > next) {
    if (!to_ref(args, args->inputs[next++], "bias", &c->bias, why)) return false;
    c->a.bias = &c->bias;
  }
  c->a.eps = static_cast<float>(gk_attr_float(args, "eps", 1e-5));
  if (!kr::can_implement_norm(c->a, why)) {
    *why = std::string(op) + ": " + *why;
    return false;
  }
  return true;
}

}  // namespace

bool norm_serves(const char* op) {
  return std::strcmp(op, "layernorm") == 0 || std::strcmp(op, "rmsnorm") == 0 ||
         std::strcmp(op, "add_layernorm") == 0 || std::strcmp(op, "add_rmsnorm") == 0;
}

bool norm_supports(const gk_kernel_args* args, std::string* why) {
  Call c;
  return resolve(args, &c, why);
}

gk_status norm_launch(const gk_kernel_args* args, LaunchContext& ctx) {
  Call c;
  std::string why;
  if (!resolve(args, &c, &why)) return ctx.cuda_error(why.c_str(), cudaErrorInvalidValue);
  void* ws = nullptr;
  const gk_status st = ctx.workspace(kr::norm_workspace_bytes(c.a), &ws);
  if (st != GK_OK) return st;
  return ctx.check(kr::launch_norm(c.a, ws, ctx.stream()), "norm kernel launch");
}

}  // namespace gk::plugins::reductions_cuda
