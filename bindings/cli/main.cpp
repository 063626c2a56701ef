// gpukit — command-line view of a GPUkit runtime: versions, devices, plugins and dispatch.
//
//   gpukit info [--json]
//   gpukit plugins [--json]
//   gpukit explain OP [--device N] [--dtype T] [--shape 64x64 ...] [--attr k=v ...] [--json]
//
// A client of the C ABI (gpukit.h) only. On failure it prints the status and
// gk_last_error() to stderr and exits non-zero.
#include <gpukit/gpukit.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "op_signatures.h"
#include "table.h"

namespace gk::cli {
namespace {

// A failed gk_ call, carrying its status and the thread's gk_last_error() message.
class GkError : public std::runtime_error {
 public:
  GkError(gk_status status, const std::string& what)
      : std::runtime_error(std::string(gk_status_name(status)) + ": " + what), status_(status) {}
  gk_status status() const { return status_; }

 private:
  gk_status status_;
};

void check(gk_status status, const char* call) {
  if (status != GK_OK) {
    const std::string message = gk_last_error();
    throw GkError(status, message.empty() ? std::string(call) + " failed" : message);
  }
}

struct RuntimeDeleter {
  void operator()(gk_runtime* rt) const { gk_runtime_destroy(rt); }
};
using RuntimePtr = std::unique_ptr<gk_runtime, RuntimeDeleter>;

struct StringDeleter {
  void operator()(char* s) const { gk_string_free(s); }
};
using GkString = std::unique_ptr<char, StringDeleter>;

struct GlobalOptions {
  std::string devices;      // "" = library default
  std::string plugin_path;  // extra manifest folders
  std::string plugins_disable;
  std::string log_level = "warning";
};

int32_t parse_log_level(const std::string& name) {
  if (name == "debug") return GK_LOG_DEBUG;
  if (name == "info") return GK_LOG_INFO;
  if (name == "warning") return GK_LOG_WARNING;
  if (name == "error") return GK_LOG_ERROR;
  return GK_LOG_OFF;
}

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

// CUDA's 13000 → "13.0"; 0 → "-".
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

std::string str(const char* s) {
  return s ? s : "";
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

std::vector<gk_plugin_info> plugins_of(const gk_runtime* rt) {
  const int32_t count = gk_plugin_count(rt);
  std::vector<gk_plugin_info> plugins;
  for (int32_t i = 0; i < count; ++i) {
    gk_plugin_info p{};
    p.struct_size = sizeof p;
    check(gk_plugin_get(rt, i, &p), "gk_plugin_get");
    plugins.push_back(p);
  }
  return plugins;
}

std::string sm_range(const gk_plugin_info& p) {
  if (p.device_kind != GK_DEVICE_KIND_CUDA) return "-";
  if (p.sm_max >= 990) return sm_string(p.sm_min) + "+";  // "max: 999" means open-ended
  if (p.sm_min == p.sm_max) return sm_string(p.sm_min);
  return sm_string(p.sm_min) + "-" + sm_string(p.sm_max);
}

void print_plugin_table(const std::vector<gk_plugin_info>& plugins, bool paths) {
  std::vector<std::string> header = {"NAME", "VERSION",  "FAMILY", "DEVICE",
                                     "SM",   "PRIORITY", "STATUS", "REASON"};
  if (paths) header.insert(header.end() - 1, "MANIFEST");
  Table t(header);
  for (const auto& p : plugins) {
    std::vector<std::string> row = {str(p.name),
                                    str(p.version),
                                    str(p.family),
                                    kind_string(p.device_kind),
                                    sm_range(p),
                                    std::to_string(p.priority),
                                    p.loaded ? "loaded" : "skipped",
                                    str(p.reason)};
    if (paths) row.insert(row.end() - 1, str(p.manifest_path));
    t.add_row(row);
  }
  if (t.empty()) {
    std::cout << "(no plugin manifests found)\n";
  } else {
    t.print(std::cout);
  }
}

nlohmann::json plugins_json(const std::vector<gk_plugin_info>& plugins) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : plugins) {
    list.push_back({{"name", str(p.name)},
                    {"version", str(p.version)},
                    {"family", str(p.family)},
                    {"manifest_path", str(p.manifest_path)},
                    {"library_path", str(p.library_path)},
                    {"loaded", p.loaded != 0},
                    {"reason", str(p.reason)},
                    {"priority", p.priority},
                    {"device_kind", kind_string(p.device_kind)},
                    {"sm_min", p.sm_min},
                    {"sm_max", p.sm_max}});
  }
  return list;
}

// ---------------------------------------------------------------------------------------
// Subcommands
// ---------------------------------------------------------------------------------------

int cmd_info(const GlobalOptions& g, bool json) {
  RuntimePtr rt = open_runtime(g);
  if (json) {
    char* out = nullptr;
    check(gk_runtime_info_json(rt.get(), &out), "gk_runtime_info_json");
    GkString owned(out);
    std::cout << out << '\n';
    return 0;
  }
  std::cout << "GPUkit " << gk_library_version() << "  (ABI " << version_string(gk_abi_version())
            << ", this tool built against ABI " << version_string(GK_ABI_VERSION) << ")\n\n";

  const auto devices = devices_of(rt.get());
  const int32_t best = gk_device_default(rt.get());
  std::cout << "Devices (default: " << best << ")\n";
  Table dt(
      {"ID", "KIND", "NAME", "SM", "SMS", "MEMORY", "FREE", "DRIVER", "NVRTC", "PLUGINS", "NOTE"});
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    const bool cuda = d.kind == GK_DEVICE_KIND_CUDA;
    dt.add_row({std::to_string(i), kind_string(d.kind), d.name, sm_string(d.sm_version),
                std::to_string(d.sm_count), bytes_string(d.total_memory),
                bytes_string(d.free_memory), cuda ? cuda_version_string(d.driver_version) : "-",
                cuda ? cuda_version_string(d.nvrtc_version) : "-",
                d.plugins_eligible ? "eligible" : (cuda ? "not eligible" : "cpu"), d.note});
  }
  dt.print(std::cout);

  const auto plugins = plugins_of(rt.get());
  int loaded = 0;
  for (const auto& p : plugins) loaded += p.loaded ? 1 : 0;
  std::cout << "\nPlugins (" << loaded << " loaded, " << plugins.size() - loaded << " skipped)\n";
  print_plugin_table(plugins, /*paths=*/false);
  return 0;
}

int cmd_plugins(const GlobalOptions& g, bool json) {
  RuntimePtr rt = open_runtime(g);
  const auto plugins = plugins_of(rt.get());
  if (json) {
    std::cout << plugins_json(plugins).dump(2) << '\n';
    return 0;
  }
  print_plugin_table(plugins, /*paths=*/true);
  return 0;
}

struct ExplainOptions {
  std::string op;
  int32_t device = -1;  // -1: gk_device_default
  std::string dtype = "f32";
  std::string out_dtype;
  std::vector<std::string> shapes;
  std::vector<std::string> attrs;
  bool json = false;
};

int cmd_explain(const GlobalOptions& g, const ExplainOptions& o) {
  const int32_t dtype = parse_dtype(o.dtype);
  if (!dtype) throw std::invalid_argument("unknown dtype '" + o.dtype + "'");
  int32_t out_dtype = 0;
  if (!o.out_dtype.empty() && !(out_dtype = parse_dtype(o.out_dtype))) {
    throw std::invalid_argument("unknown dtype '" + o.out_dtype + "'");
  }
  std::vector<Shape> shapes;
  for (const auto& s : o.shapes) shapes.push_back(parse_shape(s));
  AttrList attrs;
  for (const auto& a : o.attrs) attrs.add(a);
  const OpDescs descs = build_descs(o.op, dtype, shapes, attrs, out_dtype);

  RuntimePtr rt = open_runtime(g);
  const int32_t device = o.device >= 0 ? o.device : gk_device_default(rt.get());
  char* out = nullptr;
  check(gk_explain(rt.get(), o.op.c_str(), device, descs.inputs.data(),
                   static_cast<int32_t>(descs.inputs.size()), descs.outputs.data(),
                   static_cast<int32_t>(descs.outputs.size()), attrs.data(), attrs.size(), &out),
        "gk_explain");
  GkString owned(out);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (o.json || j.is_discarded()) {
    std::cout << (j.is_discarded() ? std::string(out) : j.dump(2)) << '\n';
    return 0;
  }

  auto text = [](const nlohmann::json& v) -> std::string {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "-";
    return v.dump();
  };
  std::string inputs;
  for (const auto& d : descs.inputs) inputs += (inputs.empty() ? "" : ", ") + describe(d);
  std::string outputs;
  for (const auto& d : descs.outputs) outputs += (outputs.empty() ? "" : ", ") + describe(d);

  gk_device_props props{};
  props.struct_size = sizeof props;
  std::string device_text = std::to_string(device);
  if (gk_device_get_props(rt.get(), device, &props) == GK_OK) {
    device_text += std::string(" (") + kind_string(props.kind) + ", " + props.name;
    if (props.sm_version) device_text += ", SM " + sm_string(props.sm_version);
    device_text += ")";
  }
  Table head({"op", o.op});
  head.add_row({"device", device_text});
  head.add_row({"inputs", inputs});
  head.add_row({"outputs", outputs});
  head.add_row({"chosen", j.contains("chosen") ? text(j["chosen"]) : "-"});
  head.print(std::cout);
  std::cout << '\n';

  Table t({"CANDIDATE", "PRIORITY", "ACCEPTED", "REASON"});
  if (j.contains("candidates") && j["candidates"].is_array()) {
    for (const auto& c : j["candidates"]) {
      t.add_row({c.contains("plugin") ? text(c["plugin"]) : "?",
                 c.contains("priority") ? text(c["priority"]) : "",
                 c.value("accepted", false) ? "yes" : "no",
                 c.contains("reason") ? text(c["reason"]) : ""});
    }
  }
  if (t.empty()) {
    std::cout << "(no candidate plugin serves this op on this device)\n";
  } else {
    t.print(std::cout);
  }
  return j.contains("chosen") && !j["chosen"].is_null() ? 0 : 3;
}

int run(int argc, char** argv) {
  CLI::App app{"gpukit — inspect a GPUkit runtime: devices, plugins and op dispatch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpukit ") + gk_library_version());
  GlobalOptions g;
  app.add_option("--devices", g.devices, "Devices to open: cpu, cuda or all (default: all)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}));
  app.add_option("--plugin-path", g.plugin_path, "Extra colon-separated manifest folders");
  app.add_option("--disable", g.plugins_disable, "Glob of plugin names to skip");
  app.add_option("--log-level", g.log_level, "debug, info, warning (default), error or off")
      ->check(CLI::IsMember({"debug", "info", "warning", "error", "off"}));

  bool info_json = false;
  CLI::App* info = app.add_subcommand("info", "Library and ABI versions, devices, plugins");
  info->add_flag("--json", info_json, "Print gk_runtime_info_json");

  bool plugins_json_flag = false;
  CLI::App* plugins =
      app.add_subcommand("plugins", "Every plugin manifest found: loaded, or skipped and why");
  plugins->add_flag("--json", plugins_json_flag, "JSON output");

  ExplainOptions e;
  CLI::App* explain =
      app.add_subcommand("explain", "Which plugin would serve an op, and why the others not");
  explain->add_option("op", e.op, "Op name (docs/ops.md)")->required();
  explain->add_option("--device,-d", e.device, "Device id (default: gk_device_default)");
  explain->add_option("--dtype,-t", e.dtype, "Input dtype (default f32)");
  explain->add_option("--out-dtype", e.out_dtype, "Output dtype of cast");
  explain->add_option("--shape,-s", e.shapes,
                      "Shape of input i, e.g. 64x64; repeat per input (default 64x64)");
  explain->add_option("--attr,-a", e.attrs,
                      "Attribute name=value: int, float, ints (1,2 or [1]), else text");
  explain->add_flag("--json", e.json, "Print gk_explain's JSON");

  CLI11_PARSE(app, argc, argv);

  if (info->parsed()) return cmd_info(g, info_json);
  if (plugins->parsed()) return cmd_plugins(g, plugins_json_flag);
  if (explain->parsed()) return cmd_explain(g, e);
  return 2;
}

}  // namespace
}  // namespace gk::cli

int main(int argc, char** argv) {
  try {
    return gk::cli::run(argc, argv);
  } catch (const gk::cli::GkError& e) {
    std::cerr << "gpukit: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpukit: " << e.what() << '\n';
    return 2;
  }
}
