// The llm plugins' argument checks (call_args.h): plugin tensors as kernel views, checked
// so that a plugin called directly (not through the core's rules) cannot read out of bounds.
#include "call_args.h"

namespace gk::plugins::llm_cuda {

using gk::plugin::dtype_name;  // the SDK's table (gpukit_plugin.hpp)

bool map_dtype(int32_t dtype, kl::DType* out) {
  switch (dtype) {
    case GK_DTYPE_F32:
      *out = kl::DType::f32;
      return true;
    case GK_DTYPE_F16:
      *out = kl::DType::f16;
      return true;
    case GK_DTYPE_BF16:
      *out = kl::DType::bf16;
      return true;
    case GK_DTYPE_I32:
      *out = kl::DType::i32;
      return true;
    case GK_DTYPE_I64:
      *out = kl::DType::i64;
      return true;
    default:
      return false;
  }
}

bool floating(kl::DType t) {
  return t == kl::DType::f32 || t == kl::DType::f16 || t == kl::DType::bf16;
}

std::string shape_text(const kl::View& v) {
  std::string s = "[";
  for (int d = 0; d < v.ndim; ++d) s += (d ? ", " : "") + std::to_string(v.shape[d]);
  return s + "]";
}

// Tensor `t` as a view; `role` names it in `why`. `ndim` < 0: any.
bool to_view(const gk_kernel_args* args, const gk_plugin_tensor& t, const char* role, int ndim,
             kl::View* out, std::string* why) {
  if (!map_dtype(t.dtype, &out->dtype)) {
    *why = std::string(args->op) + ": " + role + " has dtype " + dtype_name(t.dtype) +
           ", which the llm kernels do not take (f32, f16, bf16; i32/i64 ids and lengths)";
    return false;
  }
  if (t.ndim < 0 || t.ndim > kl::kMaxDims || (ndim >= 0 && t.ndim != ndim)) {
    *why = std::string(args->op) + ": " + role + " has " + std::to_string(t.ndim) +
           " dims; expected " + (ndim >= 0 ? std::to_string(ndim) : "at most 8");
    return false;
  }
  out->data = t.data;
  out->ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    out->shape[d] = t.shape[d];
    out->strides[d] = t.strides[d];
  }
  return true;
}

bool fail(std::string* why, const gk_kernel_args* args, const std::string& problem) {
  *why = std::string(args->op) + ": " + problem;
  return false;
}

bool counts(const gk_kernel_args* args, int min_in, int max_in, std::string* why) {
  if (args->num_inputs < min_in || args->num_inputs > max_in || args->num_outputs != 1) {
    return fail(why, args,
                "got " + std::to_string(args->num_inputs) + " inputs and " +
                    std::to_string(args->num_outputs) + " outputs; expected " +
                    std::to_string(min_in) +
                    (min_in == max_in ? "" : " to " + std::to_string(max_in)) + " and 1");
  }
  return true;
}

bool same_dims(const kl::View& a, const kl::View& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

bool resolve_attention(const gk_kernel_args* args, AttentionCall* c, std::string* why) {
  if (!counts(args, 3, 5, why)) return false;
  const bool paged = args->num_inputs == 5;
  if (!to_view(args, args->inputs[0], "input 'q'", 4, &c->q, why) ||
      !to_view(args, args->inputs[1], "input 'k'", 4, &c->k, why) ||
      !to_view(args, args->inputs[2], "input 'v'", 4, &c->v, why) ||
      !to_view(args, args->outputs[0], "output 'out'", 4, &c->out, why)) {
    return false;
  }
  if (!floating(c->q.dtype) || c->k.dtype != c->q.dtype || c->v.dtype != c->q.dtype ||
      c->out.dtype != c->q.dtype) {
    return fail(why, args, "q, k, v and out need one dtype of f32, f16, bf16");
  }
  if (!same_dims(c->k, c->v) || (!paged && c->k.shape[0] != c->q.shape[0]) ||
      (paged && c->k.shape[1] == 0) || c->k.shape[3] != c->q.shape[3] || c->k.shape[2] == 0 ||
      c->q.shape[2] % c->k.shape[2] != 0 || !same_dims(c->q, c->out)) {
    return fail(why, args,
                "shapes q " + shape_text(c->q) + ", k " + shape_text(c->k) + ", v " +
                    shape_text(c->v) + ", out " + shape_text(c->out) + " do not fit together");
  }
  if (args->num_inputs >= 4) {
    if (!to_view(args, args->inputs[3], "input 'kv_lengths'", 1, &c->lengths, why)) return false;
    if (c->lengths.dtype != kl::DType::i32 || c->lengths.shape[0] != c->q.shape[0]) {
      return fail(why, args,
                  "input 'kv_lengths' must be i32 [" + std::to_string(c->q.shape[0]) + "]");
    }
  }
  if (paged) {
    if (!to_view(args, args->inputs[4], "input 'block_table'", 2, &c->table, why)) return false;
    if (c->table.dtype != kl::DType::i32 || c->table.shape[0] != c->q.shape[0]) {
      return fail(
          why, args,
          "input 'block_table' must be i32 [" + std::to_string(c->q.shape[0]) + ", max_blocks]");
    }
  }
  c->p = gk::llm::read_attention(args->attrs, args->num_attrs, c->q.shape[3]);
  return true;
}

}  // namespace gk::plugins::llm_cuda
