// Finds plugin manifests, decides which plugins this machine can use, loads them with
// Boost.DLL (local, immediate binding) and keeps every candidate, loaded or skipped,
// with its reason. One broken plugin never stops the others.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <memory>
#include <string>
#include <vector>

#include "gpukit/gpukit_plugin.h"
#include "plugin/manifest.h"

namespace gk {

class DeviceMemory;
class DeviceSet;
class Logger;
struct PluginRecord;

// What the plugin host lends plugins (gk_host_services), and all the registry itself uses:
// the logger, the devices (device_info, the CUDA driver's symbols, matching manifests to
// SMs), their memory (alloc and free of scratch) and the op-call service. Ops are dispatched
// above this layer, so the runtime that wires the registry hands that service in: `op_call`
// becomes gk_host_services.op_call itself, and reads `op_call_context` back with
// op_call_context(). Everything named here outlives the registry.
struct PluginServices {
  const Logger* logger = nullptr;
  const DeviceSet* devices = nullptr;
  const DeviceMemory* memory = nullptr;
  gk_status (*op_call)(void* host_context, const gk_kernel_args* args) = nullptr;
  void* op_call_context = nullptr;
};

// What the host services' host_context points to: a copy of the services per plugin, so a
// service reaches what it uses with one load.
struct HostContext {
  PluginServices services;
  PluginRecord* plugin = nullptr;
};

// The op-call service's context, from the host_context a plugin passed it.
inline void* op_call_context(void* host_context) {
  return static_cast<HostContext*>(host_context)->services.op_call_context;
}

struct PluginRecord {
  std::string name;            // from the manifest, or the file's stem when unreadable
  Manifest manifest;           // valid when manifest_ok
  bool manifest_ok = false;
  bool loaded = false;
  std::string reason;          // why skipped
  boost::dll::shared_library library;
  const gk_plugin_api* api = nullptr;
  void* state = nullptr;
  HostContext host_context;
  gk_host_services services{};
};

class PluginRegistry {
 public:
  // Reads every *.yaml in `folders` (in order, files sorted by name). Plugins whose name
  // matches one of `disabled` (fnmatch globs) are skipped.
  PluginRegistry(const PluginServices& services, const std::vector<std::string>& folders,
                 const std::vector<std::string>& disabled);
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  const std::vector<std::unique_ptr<PluginRecord>>& records() const { return records_; }

 private:
  void consider(const std::string& manifest_path, const std::vector<std::string>& disabled);
  // Why no device of this runtime can use the manifest's plugin, or "".
  std::string device_mismatch(const Manifest& manifest) const;
  void load(PluginRecord& record);

  const Logger& logger() const { return *services_.logger; }

  PluginServices services_;
  std::vector<std::unique_ptr<PluginRecord>> records_;
};

// The message a plugin left with host->report_error on this thread, then cleared.
std::string take_plugin_error();

// Folder of the manifests installed beside libgpukit (<libdir>/gpukit/manifests).
std::string default_manifest_folder();

}  // namespace gk
