// The cpu plugin's entry point: version negotiation, the function table, and the C
// boundary. Nothing below throws past this file: every table function catches.
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cpu_ops.h"
#include "gpukit/gpukit_plugin.h"

#ifndef GPUKIT_CPU_PLUGIN_VERSION
#define GPUKIT_CPU_PLUGIN_VERSION "0.0.0"
#endif

namespace gk::cpu {
namespace {

struct PluginState {
  const gk_host_services* host;
};

// A host struct field may be read only when the host's struct_size covers it.
#define GK_CPU_HOST_HAS(host, field) \
  ((host)->struct_size >= GK_STRUCT_SIZE(gk_host_services, field) && (host)->field != nullptr)

void report_error(const gk_host_services* host, const std::string& message) {
  if (host != nullptr && GK_CPU_HOST_HAS(host, report_error)) {
    host->report_error(host->host_context, message.c_str());
  }
}

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
  if (dtype_size(t.dtype) == 0) {
    return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': ", kind, ' ', index,
                " has unknown dtype ", t.dtype);
  }
  return GK_OK;
}

// Everything supports() decides: a call this plugin can serve, on a cpu device.
gk_status check_call(const PluginState* state, const gk_kernel_args* args, const OpDef** op,
                     std::string& message) {
  if (args == nullptr || args->struct_size < GK_KERNEL_ARGS_SIZE) {
    return fail(message, GK_INVALID_ARGUMENT, "cpu plugin: kernel args missing or struct_size ",
                args ? args->struct_size : 0, " below ", GK_KERNEL_ARGS_SIZE);
  }
  if (args->op == nullptr) return fail(message, GK_INVALID_ARGUMENT, "cpu plugin: op is NULL");
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
  const gk_host_services* host = state != nullptr ? state->host : nullptr;
  if (host != nullptr && GK_CPU_HOST_HAS(host, device_info)) {
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

void copy_reason(const std::string& message, char* reason, size_t capacity) {
  if (reason == nullptr || capacity == 0) return;
  const size_t n = message.size() < capacity - 1 ? message.size() : capacity - 1;
  std::memcpy(reason, message.data(), n);
  reason[n] = '\0';
}

gk_status cpu_init(const gk_host_services* host, void** state) {
  try {
    if (state == nullptr) return GK_INVALID_ARGUMENT;
    *state = new PluginState{host};
    return GK_OK;
  } catch (...) {
    report_error(host, "cpu plugin: out of memory creating its state");
    return GK_RESOURCE_EXHAUSTED;
  }
}

void cpu_shutdown(void* state) {
  delete static_cast<PluginState*>(state);
}

gk_status cpu_supports(void* state, const gk_kernel_args* args, char* reason,
                       size_t reason_capacity) {
  try {
    std::string message;
    const OpDef* op = nullptr;
    if (check_call(static_cast<PluginState*>(state), args, &op, message) == GK_OK) return GK_OK;
    copy_reason(message, reason, reason_capacity);
  } catch (const std::exception& e) {
    copy_reason(cat("cpu plugin: internal error in supports(): ", e.what()), reason,
                reason_capacity);
  } catch (...) {
    copy_reason("cpu plugin: internal error in supports()", reason, reason_capacity);
  }
  return GK_UNIMPLEMENTED;
}

gk_status cpu_launch(void* state, const gk_kernel_args* args) {
  const PluginState* plugin = static_cast<PluginState*>(state);
  const gk_host_services* host = plugin != nullptr ? plugin->host : nullptr;
  gk_status status = GK_OK;
  std::string message;
  try {
    const OpDef* op = nullptr;
    status = check_call(plugin, args, &op, message);
    if (status == GK_OK) status = op->run(*args, message);
  } catch (const std::bad_alloc&) {
    status = GK_RESOURCE_EXHAUSTED;
    message = cat("op '", args && args->op ? args->op : "?",
                  "': cpu plugin ran out of host memory for its scratch buffers");
  } catch (const std::exception& e) {
    status = GK_INTERNAL;
    message =
        cat("op '", args && args->op ? args->op : "?", "': cpu plugin internal error: ", e.what());
  } catch (...) {
    status = GK_INTERNAL;
    message = "cpu plugin: unknown internal error in launch()";
  }
  if (status != GK_OK) {
    try {
      report_error(host, message);
    } catch (...) {
      // The host's callback threw; nothing more can be said across the boundary.
    }
  }
  return status;
}

const gk_plugin_api kApi = {
    sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "cpu",       GPUKIT_CPU_PLUGIN_VERSION, &cpu_init,
    &cpu_shutdown,         &cpu_supports,         &cpu_launch,
    nullptr,  // a kernel plugin: no model interface
};

}  // namespace
}  // namespace gk::cpu

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  if (api == nullptr) return GK_INVALID_ARGUMENT;
  const gk_status status = gk_plugin_check_host(host, "cpu plugin");
  if (status == GK_OK) *api = &gk::cpu::kApi;
  return status;
}
