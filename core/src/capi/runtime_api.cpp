// Runtime, devices, plugins and the info document.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "capi/capi_util.h"
#include "common/dtype.h"
#include "device/cuda_driver.h"

namespace gk {

char* c_string(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

namespace {

std::string version_text(uint32_t v) {
  return std::to_string(GK_VERSION_MAJOR(v)) + "." + std::to_string(GK_VERSION_MINOR(v));
}

}  // namespace

}  // namespace gk

extern "C" {

GK_API gk_status gk_runtime_create(const gk_runtime_options* options, gk_runtime** out) {
  return gk::c_guard([&] {
    gk::require_arg(out, "gk_runtime_create", "out");
    *out = nullptr;
    auto config = gk::RuntimeConfig::from_options(options);
    auto runtime = std::make_shared<gk::Runtime>(config);
    // Allocations may outlive the handle; each pool keeps the runtime while any is live.
    for (const gk::Device& d : runtime->devices().devices()) {
      runtime->memory().pool(d).hold_while_live(runtime);
    }
    *out = new gk_runtime{std::move(runtime)};
  });
}

GK_API void gk_runtime_destroy(gk_runtime* runtime) {
  if (!runtime) return;
  for (const gk::Device& d : runtime->impl->devices().devices()) {
    runtime->impl->memory().pool(d).close();
  }
  delete runtime;
}

GK_API gk_status gk_device_count(const gk_runtime* runtime, int32_t* out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_device_count");
    gk::require_arg(out, "gk_device_count", "out");
    *out = int32_t(rt.devices().devices().size());
  });
}

GK_API gk_status gk_device_get_props(const gk_runtime* runtime, int32_t device,
                                     gk_device_props* props) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_device_get_props");
    gk::require_arg(props, "gk_device_get_props", "props");
    gk::require_struct(props->struct_size, GK_DEVICE_PROPS_SIZE, "gk_device_get_props",
                       "gk_device_props");
    const gk::Device& d = rt.devices().at(device);
    // Filled whole here, then copied up to the caller's struct_size (which may be smaller
    // than this header's struct, or larger when the caller's header is newer).
    gk_device_props p{};
    p.kind = d.kind;
    p.ordinal = d.ordinal;
    std::snprintf(p.name, sizeof(p.name), "%s", d.name.c_str());
    p.sm_version = d.sm_version;
    p.sm_count = d.sm_count;
    p.total_memory = d.total_memory;
    p.free_memory = rt.devices().free_memory(d);
    p.driver_version = rt.devices().driver() ? rt.devices().driver()->version() : 0;
    p.nvrtc_version = gk::cuda::nvrtc_version();
    p.plugins_eligible = d.plugins_eligible ? 1 : 0;
    std::snprintf(p.note, sizeof(p.note), "%s", d.note.c_str());
    const size_t size = props->struct_size;
    std::memcpy(props, &p, std::min(size, sizeof(p)));
    props->struct_size = size;
  });
}

GK_API int32_t gk_device_default(const gk_runtime* runtime) {
  if (!runtime) return 0;
  for (const gk::Device& d : runtime->impl->devices().devices()) {
    if (d.is_cuda() && d.plugins_eligible) return d.id;
  }
  return 0;
}

GK_API int32_t gk_plugin_count(const gk_runtime* runtime) {
  return runtime ? int32_t(runtime->impl->plugins().records().size()) : 0;
}

GK_API gk_status gk_plugin_get(const gk_runtime* runtime, int32_t index, gk_plugin_info* out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_plugin_get");
    gk::require_arg(out, "gk_plugin_get", "out");
    gk::require_struct(out->struct_size, GK_PLUGIN_INFO_SIZE, "gk_plugin_get", "gk_plugin_info");
    const auto& records = rt.plugins().records();
    if (index < 0 || index >= int32_t(records.size())) {
      gk::fail(GK_OUT_OF_RANGE, "gk_plugin_get: plugin index " + std::to_string(index) +
                                    " is out of range (the runtime has " +
                                    std::to_string(records.size()) + " plugin candidates)");
    }
    const gk::PluginRecord& r = *records[size_t(index)];
    const gk::Manifest& m = r.manifest;
    out->name = r.name.c_str();
    out->version = m.version.c_str();
    out->family = m.family.c_str();
    out->manifest_path = m.path.c_str();
    out->library_path = m.library.c_str();
    out->loaded = r.loaded ? 1 : 0;
    out->reason = r.reason.c_str();
    out->priority = m.priority;
    out->device_kind = r.manifest_ok ? m.device : 0;
    out->sm_min = m.sm_min;
    out->sm_max = m.sm_max;
  });
}

GK_API gk_status gk_runtime_info_json(gk_runtime* runtime, char** out_json) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_runtime_info_json");
    gk::require_arg(out_json, "gk_runtime_info_json", "out_json");
    nlohmann::json j;
    j["library_version"] = gk_library_version();
    j["abi_version"] = gk::version_text(GK_ABI_VERSION);
    j["plugin_abi_version"] = gk::version_text(GK_MAKE_VERSION(1, 0));
    const auto* driver = rt.devices().driver();
    j["cuda_driver_version"] = driver ? driver->version() : 0;
    j["nvrtc_version"] = gk::cuda::nvrtc_version();
    if (!driver || rt.devices().devices().size() == 1) {
      j["cuda_absent_reason"] = rt.devices().cuda_absent_reason();
    }
    j["devices"] = nlohmann::json::array();
    for (const gk::Device& d : rt.devices().devices()) {
      j["devices"].push_back({{"id", d.id},
                              {"kind", d.is_cuda() ? "cuda" : "cpu"},
                              {"label", d.label()},
                              {"name", d.name},
                              {"sm_version", d.sm_version},
                              {"sm_count", d.sm_count},
                              {"total_memory", d.total_memory},
                              {"free_memory", rt.devices().free_memory(d)},
                              {"plugins_eligible", d.plugins_eligible},
                              {"note", d.note}});
    }
    j["default_device"] = gk_device_default(runtime);
    j["plugins"] = nlohmann::json::array();
    for (const auto& r : rt.plugins().records()) {
      nlohmann::json p = {{"name", r->name},
                          {"loaded", r->loaded},
                          {"reason", r->reason},
                          {"manifest", r->manifest.path}};
      if (r->manifest_ok) {
        const gk::Manifest& m = r->manifest;
        p["version"] = m.version;
        p["family"] = m.family;
        p["library"] = m.library;
        p["device"] = m.device == GK_DEVICE_KIND_CUDA ? "cuda" : "cpu";
        p["priority"] = m.priority;
        if (m.device == GK_DEVICE_KIND_CUDA) p["sm"] = m.sm_text();
        nlohmann::json ops = nlohmann::json::array();
        for (const auto& op : m.ops) ops.push_back(op.name);
        p["ops"] = ops;
      }
      j["plugins"].push_back(p);
    }
    *out_json = gk::c_string(gk::json_text(j, 2));
  });
}

}  // extern "C"
