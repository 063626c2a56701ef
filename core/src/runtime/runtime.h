// The runtime: its configuration, logger, devices, memory and plugins. Shared by every
// object made from it (streams, events, buffers, tensors), so it lives until the last
// of them is gone, whatever order a client frees them in.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "device/device.h"
#include "dispatch/dispatcher.h"
#include "memory/device_memory.h"
#include "memory/host_memory.h"
#include "memory/transfer_engine.h"
#include "plugin/plugin_registry.h"
#include "scheduler/scheduler.h"

namespace gk {

// gk_runtime_options resolved against the environment.
struct RuntimeConfig {
  std::string devices = "all";
  std::vector<std::string> plugin_folders;
  std::vector<std::string> disabled_plugins;  // globs
  int32_t log_level = GK_LOG_WARNING;  // quiet by default: warnings and errors only
  TransferTuning transfer;  // GPUKIT_TRANSFER_* unless the environment is ignored
  // False with GK_RUNTIME_IGNORE_ENVIRONMENT: calls that read a variable when they run
  // (gk_model_load's GPUKIT_LLM_PACKED) do not either.
  bool use_environment = true;
  gk_log_fn log_fn = nullptr;
  void* log_user_data = nullptr;

  // Throws INVALID_ARGUMENT for bad option values (naming the variable or field).
  static RuntimeConfig from_options(const gk_runtime_options* options);
};

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  explicit Runtime(const RuntimeConfig& config);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeConfig& config() const { return config_; }
  const Logger& logger() const { return logger_; }
  const DeviceSet& devices() const { return devices_; }
  const DeviceMemory& memory() const { return memory_; }
  const PluginRegistry& plugins() const { return *plugins_; }
  // The plugins chosen for the calls seen so far (gk_op_call, gk_op_call_alloc).
  DispatchCache& dispatch_cache() const { return dispatch_cache_; }
  Scheduler& scheduler() const { return *scheduler_; }
  // The transfer engine of a device: host <-> device copies (docs/memory.md, "Transfers").
  TransferEngine& transfers(const Device& device) const { return *transfers_[size_t(device.id)]; }
  // The memory of gk_host_alloc (pinned when there is a CUDA device).
  HostMemory& host_memory() const { return *host_memory_; }
  // The default stream object of device `id` (the CUDA legacy default stream).
  gk_stream* default_stream(int32_t id) const;

 private:
  RuntimeConfig config_;
  Logger logger_;
  DeviceSet devices_;
  DeviceMemory memory_;
  std::unique_ptr<Scheduler> scheduler_;  // its tasks' owners live in memory_'s pools
  // Before the engines, which use it; the engines go before the devices' contexts.
  std::unique_ptr<HostCopyPool> host_copies_;
  std::vector<std::unique_ptr<TransferEngine>> transfers_;
  std::unique_ptr<HostMemory> host_memory_;
  std::vector<std::unique_ptr<gk_stream>> default_streams_;
  mutable DispatchCache dispatch_cache_;     // points into plugins_
  std::unique_ptr<PluginRegistry> plugins_;  // last: unloaded first
};

}  // namespace gk
