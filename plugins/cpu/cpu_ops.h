// The cpu plugin's op table and the checks every op family shares.
//
// Each op has two functions. `check` decides from dtypes, argument counts and attributes
// alone whether the plugin can serve a call (supports() turns a failure into a decline).
// `run` checks shapes again, since it reads and writes memory by them, and executes the op
// synchronously. Both return a gk_status and, on failure, a message naming op, argument
// and value.
#ifndef GPUKIT_PLUGINS_CPU_CPU_OPS_H_
#define GPUKIT_PLUGINS_CPU_CPU_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"

namespace gk::cpu {

struct OpDef {
  const char* name;
  gk_status (*check)(const gk_kernel_args& args, std::string& message);
  gk_status (*run)(const gk_kernel_args& args, std::string& message);
};

std::span<const OpDef> elementwise_ops();
std::span<const OpDef> reduction_ops();
std::span<const OpDef> softmax_ops();
std::span<const OpDef> norm_ops();
std::span<const OpDef> matmul_ops();
// matmul with a block-quantized 'b' (matmul_quant.cpp): matmul_ops() hands such calls here.
gk_status check_matmul_packed(const gk_kernel_args& args, std::string& message);
gk_status run_matmul_packed(const gk_kernel_args& args, std::string& message);
// Whether input 'b' of a matmul call is block-quantized.
inline bool matmul_b_packed(const gk_kernel_args& args) {
  const gk::plugin::DtypeInfo* d =
      args.num_inputs >= 2 ? gk::plugin::dtype_info(args.inputs[1].dtype) : nullptr;
  return d && d->block > 1;
}
std::span<const OpDef> llm_ops();
std::span<const OpDef> asr_ops();

using gk::plugin::dtype_name;  // the SDK's table (gpukit_plugin.hpp)
using gk::plugin::dtype_size;
std::string shape_string(const gk_plugin_tensor& t);

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

// Sets `message` and returns `status`, so failures read `return fail(msg, code, …);`.
template <class... Parts>
gk_status fail(std::string& message, gk_status status, const Parts&... parts) {
  message = cat(parts...);
  return status;
}

// Argument counts within [min, max] for inputs and outputs.
gk_status check_counts(const gk_kernel_args& args, int32_t min_inputs, int32_t max_inputs,
                       int32_t num_outputs, std::string& message);

// `t.dtype` is one of `allowed`; `role` names the argument ("input 'a'").
gk_status check_dtype(const gk_kernel_args& args, const gk_plugin_tensor& t, std::string_view role,
                      std::initializer_list<int32_t> allowed, std::string& message);

// `t.dtype` equals `dtype` (the dtype of `reference_role`).
gk_status check_same_dtype(const gk_kernel_args& args, const gk_plugin_tensor& t,
                           std::string_view role, int32_t dtype, std::string_view reference_role,
                           std::string& message);

// Same ndim and dims.
bool same_shape(const gk_plugin_tensor& a, const gk_plugin_tensor& b);

// Attributes arrive normalised by the core's op rules (gpukit_plugin.h): present, of the
// op's type, in range. The fallbacks below are the op's defaults, for a caller that does
// not give them (the conformance tests call the plugin directly).

// String attribute `name` (one of the op's spellings), or `fallback`.
const char* text_attr(const gk_kernel_args& args, const char* name, const char* fallback);

// Flag attribute `name` (keepdims, transpose_*), absent: false. The op's rules take any
// int, nonzero meaning true; this plugin serves 0 and 1 and declines the rest.
gk_status flag_attr(const gk_kernel_args& args, const char* name, bool& value,
                    std::string& message);

// Rejects data == NULL for a non-empty tensor, which launch cannot read or write.
gk_status check_data(const gk_kernel_args& args, const gk_plugin_tensor& t, std::string_view role,
                     std::string& message);

}  // namespace gk::cpu

#endif  // GPUKIT_PLUGINS_CPU_CPU_OPS_H_
