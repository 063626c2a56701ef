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

class Runtime;
struct PluginRecord;

// What the host services' host_context points to.
struct HostContext {
  Runtime* runtime = nullptr;
  PluginRecord* plugin = nullptr;
};

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
  PluginRegistry(Runtime& runtime, const std::vector<std::string>& folders,
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

  Runtime& runtime_;
  std::vector<std::unique_ptr<PluginRecord>> records_;
};

// The message a plugin left with host->report_error on this thread, then cleared.
std::string take_plugin_error();

// Folder of the manifests installed beside libgpukit (<libdir>/gpukit/manifests).
std::string default_manifest_folder();

}  // namespace gk
