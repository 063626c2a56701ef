// Argument checks shared by the plugins of the llm kernels (llm_cuda, attention_sm90): the
// plugin ABI's tensors as kernel views, with `why` naming the op, the argument and the value.
#pragma once

#include <string>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"
#include "llm/common.cuh"
#include "llm/llm_params.h"

namespace gk::plugins::llm_cuda {

namespace kl = gk::kernels::llm;

bool map_dtype(int32_t dtype, kl::DType* out);
bool floating(kl::DType t);
std::string shape_text(const kl::View& v);
// Tensor `t` as a view; `role` names it in `why`. `ndim` < 0: any.
bool to_view(const gk_kernel_args* args, const gk_plugin_tensor& t, const char* role, int ndim,
             kl::View* out, std::string* why);
// Sets `why` to "op: problem" and returns false.
bool fail(std::string* why, const gk_kernel_args* args, const std::string& problem);
// min_in .. max_in inputs and one output.
bool counts(const gk_kernel_args* args, int min_in, int max_in, std::string* why);
bool same_dims(const kl::View& a, const kl::View& b);

// attention(q, k, v[, kv_lengths[, block_table]]) -> out, as docs/ops.md defines it; `table`
// has no data without a block table, `lengths` none without kv_lengths.
struct AttentionCall {
  kl::View q, k, v, lengths, table, out;
  gk::llm::AttentionParams p;
};
bool resolve_attention(const gk_kernel_args* args, AttentionCall* c, std::string* why);

}  // namespace gk::plugins::llm_cuda
