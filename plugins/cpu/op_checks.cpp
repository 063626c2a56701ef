// Argument checks shared by every op family of the cpu plugin.
#include <cstring>

#include "cpu_ops.h"

namespace gk::cpu {



std::string shape_string(const gk_plugin_tensor& t) {
  std::string s = "[";
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (d > 0) s += ", ";
    s += cat(t.shape[d]);
  }
  return s + "]";
}

gk_status check_counts(const gk_kernel_args& args, int32_t min_inputs, int32_t max_inputs,
                       int32_t num_outputs, std::string& message) {
  if (args.num_inputs < min_inputs || args.num_inputs > max_inputs) {
    if (min_inputs == max_inputs) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': expected ", min_inputs,
                  " inputs, got ", args.num_inputs);
    }
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': expected ", min_inputs, " to ",
                max_inputs, " inputs, got ", args.num_inputs);
  }
  if (args.num_outputs != num_outputs) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': expected ", num_outputs,
                " outputs, got ", args.num_outputs);
  }
  return GK_OK;
}

gk_status check_dtype(const gk_kernel_args& args, const gk_plugin_tensor& t, std::string_view role,
                      std::initializer_list<int32_t> allowed, std::string& message) {
  for (int32_t dtype : allowed) {
    if (t.dtype == dtype) return GK_OK;
  }
  std::string names;
  for (int32_t dtype : allowed) {
    if (!names.empty()) names += ", ";
    names += dtype_name(dtype);
  }
  return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': ", role, " has dtype ",
              dtype_name(t.dtype), " (", t.dtype, "); the cpu plugin serves ", names);
}

gk_status check_same_dtype(const gk_kernel_args& args, const gk_plugin_tensor& t,
                           std::string_view role, int32_t dtype, std::string_view reference_role,
                           std::string& message) {
  if (t.dtype == dtype) return GK_OK;
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", role, " has dtype ",
              dtype_name(t.dtype), ", expected ", dtype_name(dtype), " like ", reference_role);
}

bool same_shape(const gk_plugin_tensor& a, const gk_plugin_tensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int32_t d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

const char* text_attr(const gk_kernel_args& args, const char* name, const char* fallback) {
  const gk_attr* attr = gk_find_attr(&args, name);
  return attr != nullptr ? attr->value.s : fallback;
}

gk_status flag_attr(const gk_kernel_args& args, const char* name, bool& value,
                    std::string& message) {
  const int64_t given = gk_attr_int(&args, name, 0);
  value = given == 1;
  if (given == 0 || given == 1) return GK_OK;
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': attribute '", name,
              "' must be the int 0 or 1");
}

gk_status check_data(const gk_kernel_args& args, const gk_plugin_tensor& t, std::string_view role,
                     std::string& message) {
  if (t.data != nullptr || gk_tensor_numel(&t) == 0) return GK_OK;
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", role, " ", shape_string(t),
              " has no data (NULL)");
}

}  // namespace gk::cpu
