#include "plugin/plugin_registry.h"

#include <dlfcn.h>
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "device/device.h"
#include "memory/device_memory.h"
#include "plugin/graph_services.h"
#include "plugin/library_search.h"

namespace gk {
namespace {

thread_local std::string t_plugin_error;

std::string version_text(uint32_t v) {
  return std::to_string(GK_VERSION_MAJOR(v)) + "." + std::to_string(GK_VERSION_MINOR(v));
}

// ---- host services handed to plugins ----

HostContext& host(void* context) { return *static_cast<HostContext*>(context); }

void service_log(void* context, int32_t level, const char* message) {
  HostContext& h = host(context);
  h.services.logger->log(level, "plugin " + h.plugin->name + ": " + (message ? message : ""));
}

void service_report_error(void*, const char* message) { t_plugin_error = message ? message : ""; }

gk_status service_alloc(void* context, int32_t device, uint64_t bytes, void* stream, void** out) {
  return c_guard([&] {
    require_arg(out, "host.alloc", "out");
    const PluginServices& s = host(context).services;
    *out = s.memory->allocate(s.devices->at(device), bytes, static_cast<cuda::CUstream>(stream));
  });
}

gk_status service_free(void* context, int32_t device, void* ptr, void* stream) {
  return c_guard([&] {
    const PluginServices& s = host(context).services;
    s.memory->deallocate(s.devices->at(device), ptr, static_cast<cuda::CUstream>(stream));
  });
}

gk_status service_cuda_symbol(void* context, const char* name, void** out) {
  const cuda::Driver* driver = host(context).services.devices->driver();
  if (!out || !name) return GK_INVALID_ARGUMENT;
  if (!driver) return GK_UNAVAILABLE;
  *out = driver->symbol(name);
  return *out ? GK_OK : GK_NOT_FOUND;
}

gk_status service_device_info(void* context, int32_t device, gk_plugin_device* out) {
  return c_guard([&] {
    require_arg(out, "host.device_info", "out");
    require_struct(out->struct_size, GK_PLUGIN_DEVICE_SIZE, "host.device_info", "gk_plugin_device");
    const Device& d = host(context).services.devices->at(device);
    out->id = d.id;
    out->kind = d.kind;
    out->ordinal = d.ordinal;
    out->sm_version = d.sm_version;
    out->sm_count = d.sm_count;
    out->total_memory = d.total_memory;
    out->cuda_context = d.context;
  });
}

}  // namespace

std::string take_plugin_error() {
  std::string e = std::move(t_plugin_error);
  t_plugin_error.clear();
  return e;
}

std::string default_manifest_folder() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&default_manifest_folder), &info) || !info.dli_fname) {
    return "";
  }
  return (std::filesystem::path(info.dli_fname).parent_path() / "gpukit" / "manifests").string();
}

PluginRegistry::PluginRegistry(const PluginServices& services,
                               const std::vector<std::string>& folders,
                               const std::vector<std::string>& disabled)
    : services_(services) {
  namespace fs = std::filesystem;
  for (const std::string& folder : folders) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
      std::string problem = path_kind_problem(folder);
      if (problem.empty()) problem = "is a file";
      if (problem != "does not exist") problem += ", not a folder";
      logger().warning("plugin folder '" + folder + "' " + problem + "; skipped");
      continue;
    }
    std::vector<std::string> files;
    fs::directory_iterator it(folder, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const fs::path& file = it->path();
      if (file.extension() == ".yaml" || file.extension() == ".yml") files.push_back(file.string());
    }
    if (ec) {
      logger().warning("plugin folder '" + folder + "' cannot be listed (" + ec.message() +
                       "); the manifests listed before are read");
    }
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) consider(file, disabled);
  }
}

PluginRegistry::~PluginRegistry() {
  // Shut down in reverse order of loading; the libraries unload with the records.
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    PluginRecord& r = **it;
    if (r.loaded && r.api->shutdown) r.api->shutdown(r.state);
  }
}

void PluginRegistry::consider(const std::string& path, const std::vector<std::string>& disabled) {
  auto record = std::make_unique<PluginRecord>();
  PluginRecord& r = *record;
  r.name = std::filesystem::path(path).stem().string();
  r.manifest.path = path;
  records_.push_back(std::move(record));
  try {
    r.manifest = read_manifest(path);
    r.manifest_ok = true;
    r.name = r.manifest.name;
  } catch (const Error& e) {
    r.reason = "bad manifest: " + e.message();
    logger().warning("plugin " + r.name + " skipped: " + r.reason);
    return;
  } catch (const std::exception& e) {
    // A broken plugin never fails runtime creation: whatever the reader throws is its reason.
    r.reason = "bad manifest: " + path + ": " + e.what();
    logger().warning("plugin " + r.name + " skipped: " + r.reason);
    return;
  }
  for (const auto& other : records_) {
    if (other.get() != &r && other->loaded && other->name == r.name) {
      r.reason = "duplicate plugin name '" + r.name + "': already loaded from " + other->manifest.path;
      logger().warning("plugin " + r.name + " skipped: " + r.reason);
      return;
    }
  }
  for (const std::string& glob : disabled) {
    if (fnmatch(glob.c_str(), r.name.c_str(), 0) == 0) {
      r.reason = "disabled by GPUKIT_PLUGINS_DISABLE / options.plugins_disable pattern '" + glob + "'";
      logger().info("plugin " + r.name + " skipped: " + r.reason);
      return;
    }
  }
  r.reason = device_mismatch(r.manifest);
  if (!r.reason.empty()) {
    logger().debug("plugin " + r.name + " skipped: " + r.reason);
    return;
  }
  load(r);
  if (r.loaded) {
    logger().debug("plugin " + r.name + " " + r.manifest.version + " loaded from " +
                   r.manifest.library);
  } else {
    logger().warning("plugin " + r.name + " skipped: " + r.reason);
  }
}

std::string PluginRegistry::device_mismatch(const Manifest& m) const {
  if (m.device == GK_DEVICE_KIND_CPU) return "";
  const DeviceSet& devices = *services_.devices;
  std::string seen;
  for (const Device& d : devices.devices()) {
    if (!d.is_cuda()) continue;
    if (!d.plugins_eligible) {
      seen += (seen.empty() ? "" : "; ") + d.label() + " is SM " + std::to_string(d.sm_version) +
              ", below SM " + std::to_string(kMinPluginSm);
      continue;
    }
    if (m.matches_sm(d.sm_version)) return "";
    seen += (seen.empty() ? "" : "; ") + d.label() + " is SM " + std::to_string(d.sm_version);
  }
  if (seen.empty()) {
    return "needs a CUDA device, and there is none (" + devices.cuda_absent_reason() + ")";
  }
  return m.sm_text() + " matches no device (" + seen + ")";
}

void PluginRegistry::load(PluginRecord& r) {
  const Manifest& m = r.manifest;
  std::string lib_ref = m.path + ":" + std::to_string(m.library_line);
  std::error_code fs_ec;
  if (!std::filesystem::exists(m.library, fs_ec)) {
    r.reason = "library '" + m.library + "' not found (field 'library' at " + lib_ref + ")";
    return;
  }
  // dlopen of a FIFO waits for a writer, and of a folder fails obscurely: say what it is.
  if (std::string problem = path_kind_problem(m.library); !problem.empty()) {
    r.reason = "library '" + m.library + "' " + problem + ", not a shared library (field " +
               "'library' at " + lib_ref + ")";
    return;
  }
  if (GK_VERSION_MAJOR(m.plugin_abi) != GK_PLUGIN_ABI_VERSION_MAJOR) {
    r.reason = "manifest declares plugin ABI " + version_text(m.plugin_abi) +
               "; this runtime implements plugin ABI " + version_text(GK_PLUGIN_ABI_VERSION) +
               " (major versions must match)";
    return;
  }
  // The libraries the plugin needs but does not carry (cuFFT, cuBLASLt): opened first from
  // the runtime's search folders, so its DT_NEEDED entries and dlopen calls find them.
  for (const std::string& soname : m.requires_libraries) {
    LibraryLookup lib = open_runtime_library(soname);
    if (!lib.handle) {
      r.reason = "requires " + lib.why;
      return;
    }
    logger().debug("plugin " + r.name + ": " + soname + " from " + lib.path);
  }
  boost::dll::fs::error_code ec;
  dlerror();
  r.library.load(m.library, ec,
                 boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now);
  if (ec) {
    const char* why = dlerror();
    r.reason = "cannot load library '" + m.library + "': " + (why ? why : ec.message());
    return;
  }
  if (!r.library.has(GK_PLUGIN_ENTRY_SYMBOL)) {
    r.reason = "library '" + m.library + "' does not export the entry symbol " +
               GK_PLUGIN_ENTRY_SYMBOL;
    r.library.unload();
    return;
  }
  auto entry = r.library.get<gk_status(const gk_host_services*, const gk_plugin_api**)>(
      GK_PLUGIN_ENTRY_SYMBOL);

  r.host_context = HostContext{services_, &r};
  gk_host_services& s = r.services;
  s.struct_size = sizeof(gk_host_services);
  s.abi_min = GK_MAKE_VERSION(GK_PLUGIN_ABI_VERSION_MAJOR, 0);
  s.abi_max = GK_PLUGIN_ABI_VERSION;
  s.host_context = &r.host_context;
  s.plugin_name = r.name.c_str();
  s.log = service_log;
  s.report_error = service_report_error;
  s.alloc = service_alloc;
  s.free = service_free;
  s.cuda_driver_symbol = service_cuda_symbol;
  s.device_info = service_device_info;
  s.op_call = services_.op_call;
  s.graph_begin = service_graph_begin;
  s.graph_end = service_graph_end;
  s.graph_launch = service_graph_launch;
  s.graph_release = service_graph_release;

  take_plugin_error();
  const gk_plugin_api* api = nullptr;
  gk_status status = entry(&s, &api);
  if (status != GK_OK || !api) {
    std::string why = take_plugin_error();
    r.reason = std::string(GK_PLUGIN_ENTRY_SYMBOL) + " declined (" + gk_status_name(status) + ")" +
               (why.empty() ? "" : ": " + why);
    r.library.unload();
    return;
  }
  if (api->struct_size < GK_PLUGIN_API_SIZE) {
    r.reason = "plugin function table is " + std::to_string(api->struct_size) +
               " bytes, smaller than the " + std::to_string(GK_PLUGIN_API_SIZE) +
               " bytes of plugin ABI 1.0";
    r.library.unload();
    return;
  }
  if (api->abi_version < s.abi_min || api->abi_version > s.abi_max) {
    r.reason = "plugin implements plugin ABI " + version_text(api->abi_version) +
               ", outside the range this runtime accepts (" + version_text(s.abi_min) + " to " +
               version_text(s.abi_max) + ")";
    r.library.unload();
    return;
  }
  if (!m.architectures.empty() &&
      (api->struct_size < GK_PLUGIN_API_SIZE_1_1 || !api->model ||
       api->model->struct_size < GK_MODEL_API_SIZE)) {
    r.reason = "the manifest lists architectures but the plugin has no model interface "
               "(gk_plugin_api.model, plugin ABI 1.1)";
    r.library.unload();
    return;
  }
  if (!api->supports || !api->launch) {
    r.reason = "plugin function table lacks supports() or launch()";
    r.library.unload();
    return;
  }
  if (api->init) {
    take_plugin_error();
    status = api->init(&s, &r.state);
    if (status != GK_OK) {
      std::string why = take_plugin_error();
      r.reason = std::string("init failed (") + gk_status_name(status) + ")" +
                 (why.empty() ? "" : ": " + why);
      r.library.unload();
      return;
    }
  }
  r.api = api;
  r.loaded = true;
  r.reason.clear();
}

}  // namespace gk
