#include "runtime/runtime.h"

#include <sstream>

#include "capi/op_call.h"
#include "common/environment.h"
#include "common/error.h"
#include "runtime/objects.h"

namespace gk {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

RuntimeConfig RuntimeConfig::from_options(const gk_runtime_options* o) {
  RuntimeConfig c;
  uint32_t flags = 0;
  if (o) {
    require_struct(o->struct_size, GK_RUNTIME_OPTIONS_SIZE, "gk_runtime_create", "gk_runtime_options");
    if (GK_VERSION_MAJOR(o->abi_version) != GK_ABI_VERSION_MAJOR) {
      fail(GK_FAILED_PRECONDITION,
           "gk_runtime_create: the caller was built against GPUkit ABI " +
               std::to_string(GK_VERSION_MAJOR(o->abi_version)) + "." +
               std::to_string(GK_VERSION_MINOR(o->abi_version)) + ", this library implements ABI " +
               std::to_string(GK_ABI_VERSION_MAJOR) + "." + std::to_string(GK_ABI_VERSION_MINOR) +
               " (major versions must match)");
    }
    flags = o->flags;
    if (o->devices) c.devices = o->devices;
    c.log_fn = o->log_fn;
    c.log_user_data = o->log_user_data;
    c.log_level = o->log_level;
  }
  bool use_env = !(flags & GK_RUNTIME_IGNORE_ENVIRONMENT);
  c.use_environment = use_env;
  c.transfer = TransferTuning::from_environment(use_env);
  if (!(flags & GK_RUNTIME_NO_DEFAULT_PLUGINS)) {
    std::string folder = default_manifest_folder();
    if (!folder.empty()) c.plugin_folders.push_back(folder);
  }
  if (use_env) {
    if (auto v = env_value("GPUKIT_DEVICE")) c.devices = *v;

    if (auto v = env_value("GPUKIT_PLUGIN_PATH")) {
      for (auto& f : split(*v, ':')) c.plugin_folders.push_back(f);
    }
    if (auto v = env_value("GPUKIT_PLUGINS_DISABLE")) {
      for (auto& g : split(*v, ',')) c.disabled_plugins.push_back(g);
    }
    if (auto v = env_value("GPUKIT_LOG_LEVEL")) {
      auto level = log_level_from_name(*v);
      if (!level) {
        fail(GK_INVALID_ARGUMENT, "GPUKIT_LOG_LEVEL='" + *v +
                                      "' is not one of debug, info, warning, error, off");
      }
      c.log_level = *level;
    }
  }
  if (o && o->plugin_path) {
    for (auto& f : split(o->plugin_path, ':')) c.plugin_folders.push_back(f);
  }
  if (o && o->plugins_disable) {
    for (auto& g : split(o->plugins_disable, ',')) c.disabled_plugins.push_back(g);
  }
  return c;
}

Runtime::Runtime(const RuntimeConfig& config)
    : config_(config),
      logger_(config.log_level, config.log_fn, config.log_user_data),
      devices_(config.devices, logger_),
      memory_(devices_),
      scheduler_(std::make_unique<Scheduler>(devices_, memory_, logger_)),
      host_copies_(std::make_unique<HostCopyPool>(config.transfer.host_threads)) {
  cuda::CUcontext first_cuda_context = nullptr;
  for (const Device& d : devices_.devices()) {
    default_streams_.push_back(std::unique_ptr<gk_stream>(
        new gk_stream{this, nullptr, &d, nullptr, false}));
    auto backend = d.is_cuda() ? make_cuda_transfer_backend(*devices_.driver(), d.context)
                               : make_host_transfer_backend();
    transfers_.push_back(std::make_unique<TransferEngine>(d.label(), std::move(backend),
                                                          config.transfer, *host_copies_,
                                                          &logger_));
    if (d.is_cuda() && !first_cuda_context) first_cuda_context = d.context;
  }
  host_memory_ = std::make_unique<HostMemory>(first_cuda_context ? devices_.driver() : nullptr,
                                              first_cuda_context);
  // The op-call service dispatches through this runtime: its context is the runtime itself.
  PluginServices services{&logger_, &devices_, &memory_, &op_call_service, this};
  plugins_ =
      std::make_unique<PluginRegistry>(services, config_.plugin_folders, config_.disabled_plugins);
}

Runtime::~Runtime() {
  // Work queued by plugins on the default streams must finish before they unload.
  for (const Device& d : devices_.devices()) {
    if (!d.is_cuda()) continue;
    const auto& api = devices_.driver()->api();
    if (api.cuCtxPushCurrent(d.context) == cuda::kSuccess) {
      api.cuStreamSynchronize(nullptr);
      cuda::CUcontext popped;
      api.cuCtxPopCurrent(&popped);
    }
  }
  plugins_.reset();
}

gk_stream* Runtime::default_stream(int32_t id) const {
  devices_.at(id);
  return default_streams_[size_t(id)].get();
}

}  // namespace gk
