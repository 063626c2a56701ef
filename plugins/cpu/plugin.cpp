// The cpu plugin's entry point: a plugin SDK class (gpukit_plugin.hpp), which guards the C
// boundary. Its messages name the op as "op '<op>': …", which the SDK passes on unchanged.
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cpu_ops.h"
#include "gpukit/gpukit_plugin.hpp"

#ifndef GPUKIT_CPU_PLUGIN_VERSION
#define GPUKIT_CPU_PLUGIN_VERSION "0.0.0"
#endif

namespace gk::cpu {
namespace {

// A host struct field may be read only when the host's struct_size covers it.
#define GK_CPU_HOST_HAS(host, field) \
  ((host)->struct_size >= GK_STRUCT_SIZE(gk_host_services, field) && (host)->field != nullptr)

const OpDef* find_op(const char* name) {
  for (auto family :
       {elementwise_ops(), reduction_ops(), softmax_ops(), norm_ops(), matmul_ops(),
        llm_ops(), asr_ops()}) {
    for (const OpDef& op : family) {
      if (std::strcmp(op.name, name) == 0) return &op;
    }
  }
  return nullptr;
}

gk_status check_tensor(const gk_kernel_args& args, const gk_plugin_tensor& t, const char* kind,
                       int32_t index, std::string& message) {
  if (t.ndim < 0 || t.ndim > GK_MAX_DIMS) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", kind, ' ', index,
                " has ndim ", t.ndim, ", expected 0 to ", GK_MAX_DIMS);
  }
  if (t.ndim > 0 && (t.shape == nullptr || t.strides == nullptr)) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", kind, ' ', index,
                " has ndim ", t.ndim, " but no shape or strides");
  }
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", kind, ' ', index,
                  " has negative dim ", d, " = ", t.shape[d]);
    }
  }
  const gk::plugin::DtypeInfo* info = gk::plugin::dtype_info(t.dtype);
  if (info == nullptr) {
    return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': ", kind, ' ', index,
                " has unknown dtype ", t.dtype);
  }
  if (info->size == 0 && std::strcmp(args.op, "matmul") != 0) {
    // Block-quantized: only matmul reads it (its b; matmul's own checks say which).
    return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': ", kind, ' ', index,
                " is block-quantized (", info->name, ")");
  }
  return GK_OK;
}

// Everything supports() decides: a call this plugin can serve, on a cpu device.
// The plugin SDK has checked struct_size and op already.
gk_status check_call(const gk_host_services* host, const gk_kernel_args* args, const OpDef** op,
                     std::string& message) {
  *op = find_op(args->op);
  if (*op == nullptr) {
    return fail(message, GK_UNIMPLEMENTED, "op '", args->op, "' is not served by the cpu plugin");
  }
  if ((args->num_inputs > 0 && args->inputs == nullptr) ||
      (args->num_outputs > 0 && args->outputs == nullptr) ||
      (args->num_attrs > 0 && args->attrs == nullptr)) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args->op,
                "': inputs, outputs or attrs array is NULL");
  }
  for (int32_t i = 0; i < args->num_inputs; ++i) {
    if (gk_status s = check_tensor(*args, args->inputs[i], "input", i, message)) return s;
  }
  for (int32_t i = 0; i < args->num_outputs; ++i) {
    const gk_plugin_tensor& t = args->outputs[i];
    if (gk_status s = check_tensor(*args, t, "output", i, message)) return s;
    if (t.flags & GK_TENSOR_READ_ONLY) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args->op, "': output ", i, " is read-only");
    }
  }
  for (int32_t i = 0; i < args->num_attrs; ++i) {
    if (args->attrs[i].name == nullptr) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args->op, "': attribute ", i,
                  " has no name");
    }
  }
  if (GK_CPU_HOST_HAS(host, device_info)) {
    gk_plugin_device device{};
    device.struct_size = sizeof(device);
    gk_status s = host->device_info(host->host_context, args->device, &device);
    if (s != GK_OK) {
      return fail(message, GK_UNIMPLEMENTED, "op '", args->op, "': device ", args->device,
                  " is unknown to the host (status ", s, ")");
    }
    if (device.kind != GK_DEVICE_KIND_CPU) {
      return fail(message, GK_UNIMPLEMENTED, "op '", args->op, "': device ", args->device,
                  " is not a cpu device (kind ", device.kind,
                  "); the cpu plugin serves the host"
                  " CPU only");
    }
  }
  return (*op)->check(*args, message);
}

struct CpuPlugin {
  static constexpr const char* kName = "cpu";
  static constexpr const char* kVersion = GPUKIT_CPU_PLUGIN_VERSION;
  static constexpr const char* kLabel = "cpu plugin";
  const gk_host_services* host;

  explicit CpuPlugin(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    const OpDef* op = nullptr;
    std::string message;
    if (check_call(host, &args, &op, message) == GK_OK) return true;
    *why = std::move(message);
    return false;
  }

  void launch(const gk_kernel_args& args) const {
    std::string message;
    gk_status status = GK_OK;
    try {
      const OpDef* op = nullptr;
      status = check_call(host, &args, &op, message);
      if (status == GK_OK) status = op->run(args, message);
    } catch (const std::bad_alloc&) {
      gk::plugin::fail(GK_RESOURCE_EXHAUSTED,
                       cat("op '", args.op,
                           "': cpu plugin ran out of host memory for its scratch buffers"));
    } catch (const std::exception& e) {
      gk::plugin::fail(GK_INTERNAL, cat("op '", args.op, "': cpu plugin internal error: ",
                                        e.what()));
    }
    if (status != GK_OK) gk::plugin::fail(status, message);
  }
};

}  // namespace
}  // namespace gk::cpu

GK_PLUGIN_DEFINE(gk::cpu::CpuPlugin)
