// reductions_cuda: reductions, softmax, norms, elementwise and cast on CUDA SM 80+.
// Exports gk_plugin_entry only. Every entry point catches C++ exceptions; CUDA runs
// on the device's primary context through the statically linked runtime.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cuda_device_guard.h"
#include "glue.h"

namespace gk::plugins::reductions_cuda {
namespace {

struct State {
  const gk_host_services* host;
};

struct Family {
  bool (*serves)(const char*);
  bool (*supports)(const gk_kernel_args*, std::string*);
  gk_status (*launch)(const gk_kernel_args*, LaunchContext&);
};

constexpr Family kFamilies[] = {
    {elementwise_serves, elementwise_supports, elementwise_launch},
    {reduce_serves, reduce_supports, reduce_launch},
    {softmax_serves, softmax_supports, softmax_launch},
    {norm_serves, norm_supports, norm_launch},
};

const Family* family_of(const char* op) {
  if (op == nullptr) return nullptr;
  for (const auto& f : kFamilies)
    if (f.serves(op)) return &f;
  return nullptr;
}

void write_reason(const std::string& why, char* reason, size_t capacity) {
  if (reason == nullptr || capacity == 0) return;
  std::snprintf(reason, capacity, "%s", why.c_str());
}

void report(const gk_host_services* host, const std::string& msg) {
  if (host && host->report_error) host->report_error(host->host_context, msg.c_str());
}

gk_status init(const gk_host_services* host, void** state) {
  try {
    *state = new State{host};
    return GK_OK;
  } catch (const std::exception& e) {
    report(host, std::string("reductions_cuda init: ") + e.what());
    return GK_INTERNAL;
  } catch (...) {
    report(host, "reductions_cuda init: unknown exception");
    return GK_INTERNAL;
  }
}

void shutdown(void* state) { delete static_cast<State*>(state); }

gk_status supports(void* /*state*/, const gk_kernel_args* args, char* reason,
                   size_t reason_capacity) {
  try {
    const Family* f = family_of(args->op);
    if (f == nullptr) {
      write_reason(std::string(args->op ? args->op : "(null)") +
                       ": op is not served by reductions_cuda",
                   reason, reason_capacity);
      return GK_UNIMPLEMENTED;
    }
    std::string why;
    if (!f->supports(args, &why)) {
      write_reason(why, reason, reason_capacity);
      return GK_UNIMPLEMENTED;
    }
    return GK_OK;
  } catch (const std::exception& e) {
    write_reason(std::string("reductions_cuda supports: ") + e.what(), reason, reason_capacity);
    return GK_UNIMPLEMENTED;
  } catch (...) {
    write_reason("reductions_cuda supports: unknown exception", reason, reason_capacity);
    return GK_UNIMPLEMENTED;
  }
}

gk_status launch(void* state, const gk_kernel_args* args) {
  const gk_host_services* host = static_cast<State*>(state)->host;
  try {
    const Family* f = family_of(args->op);
    if (f == nullptr) {
      report(host, std::string(args->op ? args->op : "(null)") + ": not served by reductions_cuda");
      return GK_UNIMPLEMENTED;
    }
    gk_plugin_device dev;
    std::memset(&dev, 0, sizeof(dev));
    dev.struct_size = sizeof(dev);
    gk_status st = host->device_info(host->host_context, args->device, &dev);
    if (st != GK_OK) {
      report(host, std::string(args->op) + ": device_info for device " +
                       std::to_string(args->device) + " failed");
      return st;
    }
    LaunchContext ctx(host, args);
    DeviceGuard guard;
    st = ctx.check(guard.enter(dev.ordinal), "cudaSetDevice");
    if (st != GK_OK) return st;
    return f->launch(args, ctx);
  } catch (const std::exception& e) {
    report(host, std::string(args->op ? args->op : "(null)") + ": " + e.what());
    return GK_INTERNAL;
  } catch (...) {
    report(host, std::string(args->op ? args->op : "(null)") + ": unknown exception");
    return GK_INTERNAL;
  }
}

const gk_plugin_api kApi = {
    sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "reductions_cuda", "0.1.0",
    init, shutdown, supports, launch,
};

}  // namespace
}  // namespace gk::plugins::reductions_cuda

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  using gk::plugins::reductions_cuda::kApi;
  if (api == nullptr) return GK_INVALID_ARGUMENT;
  const gk_status status = gk_plugin_check_host(host, "reductions_cuda");
  if (status == GK_OK) *api = &kApi;
  return status;
}
