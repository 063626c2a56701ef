#include "info.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "op_signatures.h"
#include "table.h"

namespace gk::cli {
namespace {

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

// A path as a reader wants it: normalised ("a/./b/../c" -> "a/c"), and relative to the
// current folder when it lies inside it.
std::string display_path(const std::string& path) {
  if (path.empty()) return path;
  namespace fs = std::filesystem;
  const fs::path normal = fs::path(path).lexically_normal();
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec && normal.is_absolute()) {
    const fs::path relative = normal.lexically_relative(cwd);
    if (!relative.empty() && *relative.begin() != "..") return relative.string();
  }
  return normal.string();
}

void print_plugin_table(const std::vector<gk_plugin_info>& plugins, bool paths) {
  const std::vector<std::string> header = {"NAME", "VERSION",  "FAMILY", "DEVICE",
                                           "SM",   "PRIORITY", "STATUS", "REASON"};
  // A reason that several plugins share (say, no CUDA device) is said once, under the table.
  std::map<std::string, int> reason_count;
  for (const auto& p : plugins) ++reason_count[str(p.reason)];
  std::vector<std::string> notes;
  auto reason_cell = [&](const std::string& reason) -> std::string {
    if (reason.empty() || reason_count[reason] < 2) return reason;
    auto it = std::find(notes.begin(), notes.end(), reason);
    if (it == notes.end()) it = notes.insert(notes.end(), reason);
    return "see (" + std::to_string(it - notes.begin() + 1) + ")";
  };
  Table t(header);
  for (const auto& p : plugins) {
    std::vector<std::string> row = {str(p.name),
                                    str(p.version),
                                    str(p.family),
                                    kind_string(p.device_kind),
                                    sm_range(p),
                                    std::to_string(p.priority),
                                    p.loaded ? "loaded" : "skipped",
                                    reason_cell(str(p.reason))};
    t.add_row(row);
  }
  if (t.empty()) {
    std::cout << "(no plugin manifests found)\n";
    return;
  }
  t.print(std::cout);
  for (size_t i = 0; i < notes.size(); ++i) {
    Table note({"(" + std::to_string(i + 1) + ")", notes[i]});
    note.print(std::cout);
  }
  if (!paths) return;
  // Paths get a table of their own: beside the reasons they would leave no room.
  std::cout << '\n';
  Table manifests({"NAME", "MANIFEST"});
  for (const auto& p : plugins) {
    manifests.add_row({str(p.name), display_path(str(p.manifest_path))});
  }
  manifests.print(std::cout);
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


}  // namespace

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
  // Without a CUDA device, why not: the line the library logs once, at info level.
  char* info = nullptr;
  if (devices.size() == 1 && gk_runtime_info_json(rt.get(), &info) == GK_OK) {
    GkString owned(info);
    const nlohmann::json j = nlohmann::json::parse(info, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.contains("cuda_absent_reason")) {
      std::cout << "No CUDA device in use: " << j["cuda_absent_reason"].get<std::string>()
                << "\n";
    }
  }

  const auto plugins = plugins_of(rt.get());
  int loaded = 0;
  for (const auto& p : plugins) loaded += p.loaded ? 1 : 0;
  std::cout << "\nPlugins (" << loaded << " loaded, " << plugins.size() - loaded << " skipped)\n";
  print_plugin_table(plugins, /*paths=*/false);
  return 0;
}

int cmd_cache(bool clear, bool json) {
  int64_t removed = 0;
  if (clear) check(gk_jit_cache_clear(&removed), "gk_jit_cache_clear");
  gk_jit_cache_stats stats{};
  stats.struct_size = sizeof(stats);
  check(gk_jit_cache_stats_get(&stats), "gk_jit_cache_stats_get");
  if (json) {
    nlohmann::json j{{"dir", stats.dir},
                     {"entries", stats.entries},
                     {"bytes", stats.bytes},
                     {"limit_bytes", stats.limit_bytes}};
    if (clear) j["removed"] = removed;
    std::cout << json_text(j, 2) << '\n';
    return 0;
  }
  if (clear) std::cout << "Removed " << removed << " JIT cache entries\n";
  const std::string used = stats.bytes ? bytes_string(uint64_t(stats.bytes)) : "0 B";
  std::cout << "JIT cache " << stats.dir << "\n  " << stats.entries << " entries, " << used
            << " of " << bytes_string(uint64_t(stats.limit_bytes))
            << " (GPUKIT_CACHE_DIR, GPUKIT_CACHE_MAX_BYTES)\n";
  return 0;
}

int cmd_plugins(const GlobalOptions& g, bool json) {
  RuntimePtr rt = open_runtime(g);
  const auto plugins = plugins_of(rt.get());
  if (json) {
    // An object with named keys, as every --json output is.
    std::cout << json_text(nlohmann::json{{"plugins", plugins_json(plugins)}}, 2) << '\n';
    return 0;
  }
  print_plugin_table(plugins, /*paths=*/true);
  return 0;
}

int cmd_explain(const GlobalOptions& g, const ExplainOptions& o) {
  const int32_t dtype = parse_dtype(o.dtype);
  if (!dtype) {
    throw std::invalid_argument("--dtype: unknown dtype '" + o.dtype + "' (known: " +
                                dtype_names() + ")");
  }
  if (o.shapes.empty()) {
    throw std::invalid_argument("give each input's shape, in order: e.g. `gpukit explain matmul "
                                "--shape 64x32 --shape 32x16` (docs/ops.md lists the inputs)");
  }
  const std::vector<gk_tensor_desc> inputs = input_descs(dtype, o.shapes);
  AttrList attrs;
  for (const auto& a : o.attrs) attrs.add(a);
  if (!o.out_dtype.empty()) {
    if (!parse_dtype(o.out_dtype)) {
      throw std::invalid_argument("--out-dtype: unknown dtype '" + o.out_dtype + "' (known: " +
                                  dtype_names() + ")");
    }
    attrs.add("dtype=" + o.out_dtype);  // cast's attribute
  }

  RuntimePtr rt = open_runtime(g);
  const int32_t device = o.device >= 0 ? o.device : gk_device_default(rt.get());
  char* out = nullptr;
  // No outputs given: the runtime infers them by the op's rules and reports them.
  check(gk_explain(rt.get(), o.op.c_str(), device, inputs.data(),
                   static_cast<int32_t>(inputs.size()), nullptr, 0, attrs.data(), attrs.size(),
                   &out),
        "gk_explain");
  GkString owned(out);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (o.json || j.is_discarded()) {
    std::cout << (j.is_discarded() ? std::string(out) : json_text(j, 2)) << '\n';
    return 0;
  }

  auto text = [](const nlohmann::json& v) -> std::string {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "-";
    return json_text(v);
  };
  // "f32[64,32], i32[8]" from the descriptors gk_explain reports.
  auto described = [&](const char* key) {
    std::string text;
    if (!j.contains(key) || !j[key].is_array()) return std::string("-");
    for (const auto& d : j[key]) {
      std::string shape;
      for (const auto& n : d["shape"]) shape += (shape.empty() ? "" : ",") + json_text(n);
      text += (text.empty() ? "" : ", ") + d["dtype"].get<std::string>() + "[" + shape + "]";
    }
    return text;
  };

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
  head.add_row({"inputs", described("inputs")});
  head.add_row({"outputs", described("outputs")});
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


}  // namespace gk::cli
