// Glue for sum, mean, prod, max, min, argmax, argmin.
#include <cstring>

#include "glue.h"
#include "reductions/reduce.cuh"

namespace gk::plugins::reductions_cuda {
namespace {

struct ReduceName {
  const char* name;
  kr::ReduceOp op;
};
constexpr ReduceName kReduce[] = {{"sum", kr::ReduceOp::sum},       {"mean", kr::ReduceOp::mean},
                                  {"prod", kr::ReduceOp::prod},     {"max", kr::ReduceOp::max},
                                  {"min", kr::ReduceOp::min},       {"argmax", kr::ReduceOp::argmax},
                                  {"argmin", kr::ReduceOp::argmin}};

const ReduceName* find(const char* op) {
  for (const auto& r : kReduce)
    if (std::strcmp(r.name, op) == 0) return &r;
  return nullptr;
}

struct Call {
  kr::ReduceOp op = kr::ReduceOp::sum;
  kr::TensorRef x, out;
  uint32_t mask = 0;
};

// Sets bit `axis` (non-negative: the core's op rules normalised it). False for axis 0 of a
// scalar, which the rules take for argmax/argmin and which has no axis to scan.
bool add_axis(const gk_kernel_args* args, int64_t axis, int ndim, uint32_t* mask,
              std::string* why) {
  if (axis >= ndim) {
    *why = std::string(args->op) + ": axis " + std::to_string(axis) +
           " is out of range or repeated for " + std::to_string(ndim) + " dims";
    return false;
  }
  *mask |= 1u << axis;
  return true;
}

bool resolve(const gk_kernel_args* args, Call* c, std::string* why) {
  const ReduceName* r = find(args->op);
  if (!r || args->num_inputs < 1 || args->num_outputs < 1) {
    *why = std::string(args->op) + ": not a reduction of reductions_cuda or missing tensors";
    return false;
  }
  c->op = r->op;
  if (!to_ref(args, args->inputs[0], "x", &c->x, why)) return false;
  if (!to_ref(args, args->outputs[0], "out", &c->out, why)) return false;
  const int nd = c->x.ndim;
  const uint32_t all = nd == 0 ? 0u : (nd >= 32 ? ~0u : ((1u << nd) - 1u));
  const bool arg = r->op == kr::ReduceOp::argmax || r->op == kr::ReduceOp::argmin;
  const gk_attr* a = gk_find_attr(args, arg ? "axis" : "axes");
  if (!a) {
    c->mask = all;
  } else if (arg) {
    if (!add_axis(args, a->value.i, nd, &c->mask, why)) return false;
  } else {
    for (int32_t i = 0; i < a->count; ++i) c->mask |= 1u << a->value.ints[i];
  }
  if (!kr::can_implement_reduce(c->op, c->x, c->mask, c->out, why)) {
    *why = std::string(args->op) + ": " + *why;
    return false;
  }
  return true;
}

}  // namespace

bool reduce_serves(const char* op) { return find(op) != nullptr; }

bool reduce_supports(const gk_kernel_args* args, std::string* why) {
  Call c;
  return resolve(args, &c, why);
}

gk_status reduce_launch(const gk_kernel_args* args, LaunchContext& ctx) {
  Call c;
  std::string why;
  if (!resolve(args, &c, &why)) return ctx.cuda_error(why.c_str(), cudaErrorInvalidValue);
  void* ws = nullptr;
  const gk_status st = ctx.workspace(kr::reduce_workspace_bytes(c.op, c.x, c.mask, c.out), &ws);
  if (st != GK_OK) return st;
  return ctx.check(kr::launch_reduce(c.op, c.x, c.mask, c.out, ws, ctx.stream()),
                   "reduction kernel launch");
}

}  // namespace gk::plugins::reductions_cuda
