#include "cli_common.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace gk::cli {
namespace {

int32_t parse_log_level(const std::string& name) {
  if (name == "debug") return GK_LOG_DEBUG;
  if (name == "info") return GK_LOG_INFO;
  if (name == "warning") return GK_LOG_WARNING;
  if (name == "error") return GK_LOG_ERROR;
  return GK_LOG_OFF;
}

}  // namespace

RuntimePtr open_runtime(const GlobalOptions& g) {
  gk_runtime_options options = GK_RUNTIME_OPTIONS_INIT;
  if (!g.devices.empty()) options.devices = g.devices.c_str();
  if (!g.plugin_path.empty()) options.plugin_path = g.plugin_path.c_str();
  if (!g.plugins_disable.empty()) options.plugins_disable = g.plugins_disable.c_str();
  options.log_level = parse_log_level(g.log_level);
  gk_runtime* rt = nullptr;
  check(gk_runtime_create(&options, &rt), "gk_runtime_create");
  return RuntimePtr(rt);
}

std::string version_string(uint32_t v) {
  return std::to_string(GK_VERSION_MAJOR(v)) + "." + std::to_string(GK_VERSION_MINOR(v));
}

std::string cuda_version_string(int32_t v) {
  if (v <= 0) return "-";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string sm_string(int32_t sm) {
  if (sm <= 0) return "-";
  return std::to_string(sm / 10) + "." + std::to_string(sm % 10);
}

std::string bytes_string(uint64_t bytes) {
  if (bytes == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

const char* kind_string(int32_t kind) {
  switch (kind) {
    case GK_DEVICE_KIND_CPU:
      return "cpu";
    case GK_DEVICE_KIND_CUDA:
      return "cuda";
    default:
      return "-";
  }
}


std::vector<gk_device_props> devices_of(const gk_runtime* rt) {
  int32_t count = 0;
  check(gk_device_count(rt, &count), "gk_device_count");
  std::vector<gk_device_props> devices;
  for (int32_t i = 0; i < count; ++i) {
    gk_device_props p{};
    p.struct_size = sizeof p;
    check(gk_device_get_props(rt, i, &p), "gk_device_get_props");
    devices.push_back(p);
  }
  return devices;
}


int32_t parse_device(const gk_runtime* rt, const std::string& spec) {
  const auto devices = devices_of(rt);
  if (!spec.empty() && std::all_of(spec.begin(), spec.end(), ::isdigit)) {
    const long id = std::stol(spec);
    if (id < 0 || id >= static_cast<long>(devices.size())) {
      throw std::invalid_argument("--device " + spec + ": there are " +
                                  std::to_string(devices.size()) + " devices (0.." +
                                  std::to_string(devices.size() - 1) + ")");
    }
    return static_cast<int32_t>(id);
  }
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const int ordinal = colon == std::string::npos ? -1 : std::atoi(spec.c_str() + colon + 1);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (kind == kind_string(devices[i].kind) && (ordinal < 0 || devices[i].ordinal == ordinal)) {
      return static_cast<int32_t>(i);
    }
  }
  throw std::invalid_argument("--device " + spec +
                              ": no such device in this runtime (see `gpukit info`)");
}

}  // namespace gk::cli
