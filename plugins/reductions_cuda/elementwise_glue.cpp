// Glue for unary, binary (broadcast), comparisons (broadcast), gated activations and cast.
#include <cstring>

#include "glue.h"
#include "reductions/elementwise.cuh"

namespace gk::plugins::reductions_cuda {
namespace {

struct UnaryName {
  const char* name;
  kr::UnaryOp op;
};
constexpr UnaryName kUnary[] = {
    {"neg", kr::UnaryOp::neg},     {"abs", kr::UnaryOp::abs},         {"exp", kr::UnaryOp::exp},
    {"log", kr::UnaryOp::log},     {"sqrt", kr::UnaryOp::sqrt},       {"rsqrt", kr::UnaryOp::rsqrt},
    {"tanh", kr::UnaryOp::tanh},   {"sigmoid", kr::UnaryOp::sigmoid}, {"relu", kr::UnaryOp::relu},
    {"gelu", kr::UnaryOp::gelu_erf}, {"silu", kr::UnaryOp::silu}};

struct BinaryName {
  const char* name;
  kr::BinaryOp op;
};
constexpr BinaryName kBinary[] = {
    {"add", kr::BinaryOp::add},         {"sub", kr::BinaryOp::sub},
    {"mul", kr::BinaryOp::mul},         {"div", kr::BinaryOp::div},
    {"maximum", kr::BinaryOp::maximum}, {"minimum", kr::BinaryOp::minimum},
    {"pow", kr::BinaryOp::pow},         {"swiglu", kr::BinaryOp::swiglu},
    {"geglu", kr::BinaryOp::geglu_erf}};

struct CompareName {
  const char* name;
  kr::CompareOp op;
};
constexpr CompareName kCompare[] = {{"eq", kr::CompareOp::eq}, {"ne", kr::CompareOp::ne},
                                    {"lt", kr::CompareOp::lt}, {"le", kr::CompareOp::le},
                                    {"gt", kr::CompareOp::gt}, {"ge", kr::CompareOp::ge}};

const UnaryName* find_unary(const char* op) {
  for (const auto& u : kUnary)
    if (std::strcmp(u.name, op) == 0) return &u;
  return nullptr;
}
const BinaryName* find_binary(const char* op) {
  for (const auto& b : kBinary)
    if (std::strcmp(b.name, op) == 0) return &b;
  return nullptr;
}
const CompareName* find_compare(const char* op) {
  for (const auto& c : kCompare)
    if (std::strcmp(c.name, op) == 0) return &c;
  return nullptr;
}

// gelu/geglu: the `approximate` attribute ("none" or "tanh": the core's op rules normalised
// it) picks the erf or tanh form.
bool approximate_tanh(const gk_kernel_args* args) {
  return std::strcmp(attr_string(args, "approximate", "none"), "tanh") == 0;
}

// Resolved call: op kind and tensors.
struct Call {
  enum Kind { kUnary, kBinary, kCompare, kCast } kind = kUnary;
  kr::UnaryOp unary = kr::UnaryOp::neg;
  kr::BinaryOp binary = kr::BinaryOp::add;
  kr::CompareOp compare = kr::CompareOp::eq;
  kr::TensorRef in[2], out;
};

bool resolve(const gk_kernel_args* args, Call* c, std::string* why) {
  const char* op = args->op;
  if (args->num_outputs < 1 || args->num_inputs < 1) {
    *why = std::string(op) + ": missing input or output";
    return false;
  }
  if (!to_ref(args, args->outputs[0], "out", &c->out, why)) return false;
  if (std::strcmp(op, "cast") == 0) {
    c->kind = Call::kCast;
    if (!to_ref(args, args->inputs[0], "x", &c->in[0], why)) return false;
    if (!kr::can_implement_cast(c->in[0], c->out, why)) {
      *why = std::string(op) + ": " + *why;
      return false;
    }
    return true;
  }
  if (const UnaryName* u = find_unary(op)) {
    c->kind = Call::kUnary;
    c->unary = u->op;
    if (!to_ref(args, args->inputs[0], "x", &c->in[0], why)) return false;
    if (c->unary == kr::UnaryOp::gelu_erf && approximate_tanh(args)) {
      c->unary = kr::UnaryOp::gelu_tanh;
    }
    if (!kr::can_implement_unary(c->unary, c->in[0], c->out, why)) {
      *why = std::string(op) + ": " + *why;
      return false;
    }
    return true;
  }
  if (const BinaryName* b = find_binary(op)) {
    c->kind = Call::kBinary;
    c->binary = b->op;
    if (args->num_inputs < 2) {
      *why = std::string(op) + ": needs two inputs";
      return false;
    }
    const bool gated = b->op == kr::BinaryOp::swiglu || b->op == kr::BinaryOp::geglu_erf;
    if (!to_ref(args, args->inputs[0], gated ? "gate" : "a", &c->in[0], why)) return false;
    if (!to_ref(args, args->inputs[1], gated ? "up" : "b", &c->in[1], why)) return false;
    if (c->binary == kr::BinaryOp::geglu_erf && approximate_tanh(args)) {
      c->binary = kr::BinaryOp::geglu_tanh;
    }
    if (!kr::can_implement_binary(c->binary, c->in[0], c->in[1], c->out, why)) {
      *why = std::string(op) + ": " + *why;
      return false;
    }
    return true;
  }
  if (const CompareName* cmp = find_compare(op)) {
    c->kind = Call::kCompare;
    c->compare = cmp->op;
    if (args->num_inputs < 2) {
      *why = std::string(op) + ": needs two inputs";
      return false;
    }
    if (!to_ref(args, args->inputs[0], "a", &c->in[0], why)) return false;
    if (!to_ref(args, args->inputs[1], "b", &c->in[1], why)) return false;
    if (!kr::can_implement_compare(c->compare, c->in[0], c->in[1], c->out, why)) {
      *why = std::string(op) + ": " + *why;
      return false;
    }
    return true;
  }
  *why = std::string(op) + ": not an elementwise op of reductions_cuda";
  return false;
}

}  // namespace

bool elementwise_serves(const char* op) {
  return std::strcmp(op, "cast") == 0 || find_unary(op) != nullptr || find_binary(op) != nullptr ||
         find_compare(op) != nullptr;
}

bool elementwise_supports(const gk_kernel_args* args, std::string* why) {
  Call c;
  return resolve(args, &c, why);
}

gk_status elementwise_launch(const gk_kernel_args* args, LaunchContext& ctx) {
  Call c;
  std::string why;
  if (!resolve(args, &c, &why)) return ctx.cuda_error(why.c_str(), cudaErrorInvalidValue);
  switch (c.kind) {
    case Call::kUnary:
      return ctx.check(kr::launch_unary(c.unary, c.in[0], c.out, ctx.stream()), "unary kernel launch");
    case Call::kBinary:
      return ctx.check(kr::launch_binary(c.binary, c.in[0], c.in[1], c.out, ctx.stream()),
                       "binary kernel launch");
    case Call::kCompare:
      return ctx.check(kr::launch_compare(c.compare, c.in[0], c.in[1], c.out, ctx.stream()),
                       "comparison kernel launch");
    case Call::kCast:
      return ctx.check(kr::launch_cast(c.in[0], c.out, ctx.stream()), "cast kernel launch");
  }
  return GK_INTERNAL;
}

}  // namespace gk::plugins::reductions_cuda
