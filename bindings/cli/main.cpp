// gpukit — command-line view of a GPUkit runtime: versions, devices, plugins, dispatch and the
// scheduler (on a demo of its own: tasks belong to the process that made them).
//
//   gpukit info [--json]
//   gpukit plugins [--json]
//   gpukit explain OP --shape 64x64 [--shape i32:8 ...] [--device N] [--dtype T]
//                  [--attr k=v ...] [--json]
//   gpukit tasks [--device N] [--json]
//   gpukit weights PATH [--device D] [--dtype T] [--json]
//   gpukit generate --model PATH --prompt TEXT [--max-tokens N] [--device D] [--chat] ...
//   gpukit transcribe FILE --model PATH [--device D] [--language L] [--json]
//
// A client of the C ABI (gpukit.h) only. On failure it prints the status and
// gk_last_error() to stderr and exits non-zero.
#include <gpukit/gpukit.h>

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_common.h"
#include "generate.h"
#include "transcribe.h"
#include "op_signatures.h"
#include "table.h"

namespace gk::cli {
namespace {

// JSON as text; bytes that are not UTF-8 (a name from a manifest, say) become U+FFFD
// instead of failing the whole view.
template <typename Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

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

// The JIT's disk cache (gpukit_jit.h): where, how full; --clear empties it. Needs no runtime.
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

// ---------------------------------------------------------------------------------------
// tasks: the scheduler's view of a demo. Tasks belong to the process that made them, so
// this command makes four in its own process and shows gk_scheduler_json for them.
// ---------------------------------------------------------------------------------------

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kDemoBudget = 256 * kMiB;

struct TaskDeleter {
  void operator()(gk_task* t) const { gk_task_destroy(t); }
};
using TaskPtr = std::unique_ptr<gk_task, TaskDeleter>;
struct StreamDeleter {
  void operator()(gk_stream* s) const { gk_stream_destroy(s); }
};
using StreamPtr = std::unique_ptr<gk_stream, StreamDeleter>;
struct TensorDeleter {
  void operator()(gk_tensor* t) const { gk_tensor_release(t); }
};
using TensorPtr = std::unique_ptr<gk_tensor, TensorDeleter>;

// One task of the demo, with what it launched (kept alive until the view is printed).
struct DemoTask {
  TaskPtr task;
  StreamPtr stream;
  std::vector<TensorPtr> tensors;
};

gk_task_spec demo_spec(const char* name, int32_t device, int32_t qos, uint64_t memory_request,
                       uint64_t memory_limit, int32_t sm_request, int32_t sm_limit) {
  gk_task_spec s{};
  s.struct_size = sizeof s;
  s.name = name;
  s.device = device;
  s.qos = qos;
  s.memory_request = memory_request;
  s.memory_limit = memory_limit;
  s.sm_request = sm_request;
  s.sm_limit = sm_limit;
  return s;
}

// Submits the task; when admitted, makes its stream and runs one add of `bytes`-sized f32
// vectors on it, so the task is Running with memory charged to it.
DemoTask start_demo_task(gk_runtime* rt, const gk_task_spec& spec, uint64_t bytes) {
  DemoTask d;
  gk_task* task = nullptr;
  check(gk_task_create(rt, &spec, &task), "gk_task_create");
  d.task.reset(task);
  gk_task_info info{};
  info.struct_size = sizeof info;
  check(gk_task_get_info(task, &info), "gk_task_get_info");
  if (info.state != GK_TASK_ADMITTED) return d;
  gk_stream* stream = nullptr;
  check(gk_task_stream_create(task, &stream), "gk_task_stream_create");
  d.stream.reset(stream);
  gk_tensor_desc desc{};
  desc.struct_size = sizeof desc;
  desc.dtype = GK_DTYPE_F32;
  desc.ndim = 1;
  desc.shape[0] = int64_t(bytes / 4);
  gk_tensor* x = nullptr;
  check(gk_tensor_create(rt, spec.device, &desc, stream, &x), "gk_tensor_create");
  d.tensors.emplace_back(x);
  gk_tensor* inputs[] = {x, x};
  gk_op_args args{};
  args.struct_size = sizeof args;
  args.inputs = inputs;
  args.num_inputs = 2;
  args.stream = stream;
  gk_tensor* out = nullptr;
  check(gk_op_call_alloc(rt, "add", &args, 1, &out, nullptr), "gk_op_call_alloc");
  d.tensors.emplace_back(out);
  return d;
}

std::string mib_string(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / double(kMiB));
  return buf;
}

void print_tasks_table(const nlohmann::ordered_json& view, const std::vector<DemoTask>& demo) {
  std::cout << "A demo: tasks belong to the process that made them, so `gpukit tasks` makes "
               "these in its own\nprocess and shows the scheduler's view of them "
               "(gk_scheduler_json; --json prints it whole).\n\n";
  for (const auto& d : view["devices"]) {
    std::ostringstream line;
    line << "Device " << d["device"].get<int>() << " (" << d["label"].get<std::string>()
         << "): memory " << mib_string(d["memory_reserved"].get<uint64_t>()) << " reserved of "
         << mib_string(d["memory_capacity"].get<uint64_t>()) << " (the demo's budget); SMs "
         << d["sms_reserved"].get<int>() << " reserved of " << d["sm_count"].get<int>()
         << "; stream priorities " << d["stream_priorities"]["least"].get<int>()
         << " (least) .. " << d["stream_priorities"]["greatest"].get<int>() << " (greatest)";
    print_wrapped(std::cout, line.str());
    line.str("");
    const auto& p = d["partitions"];
    if (p["available"].get<bool>()) {
      line << "SM partitions: " << p["granules"].get<int>() << " granules of "
           << p["granule_sms"].get<int>() << " SMs (+" << p["remainder_sms"].get<int>()
           << " remainder), " << p["exclusive_free"].get<int>() << " not held exclusively";
    } else {
      line << "SM partitions: none (" << p["why"].get<std::string>() << ")";
    }
    print_wrapped(std::cout, line.str());
    line.str("");
    const auto& pacing = d["pacing"];
    line << "BestEffort pacing: " << pacing["best_effort_inflight"].get<int>()
         << " op(s) in flight while Guaranteed work is busy (idle after "
         << pacing["guaranteed_idle_us"].get<uint32_t>() << " us, hold at most "
         << pacing["max_hold_us"].get<uint32_t>() << " us)";
    print_wrapped(std::cout, line.str());
    std::cout << '\n';
  }
  // Reasons are sentences: they follow the table, one per task, rather than a column.
  Table reasons({"TASK", "REASON"});
  std::cout << "RESERVED, IN USE, LIMIT: the task's memory; SMS: requested/limit; PRIO: the "
               "priority of its streams.\n";
  Table t({"NAME", "QOS", "STATE", "RESERVED", "IN USE", "LIMIT", "SMS", "SM PARTITION", "PRIO"});
  size_t i = 0;  // the view lists tasks in creation order, the demo's order
  for (const auto& task : view["tasks"]) {
    gk_task_info info{};
    info.struct_size = sizeof info;
    uint64_t reserved = 0;
    if (i < demo.size() && gk_task_get_info(demo[i].task.get(), &info) == GK_OK) {
      reserved = info.memory_reserved;
    }
    ++i;
    const auto& mem = task["memory"];
    const auto& sm = task["sm"];
    const uint64_t limit = mem["limit"].get<uint64_t>();
    const int sm_limit = sm["limit"].get<int>();
    const int partition = sm["partition"].get<int>();
    t.add_row({task["name"].get<std::string>(), task["qos"].get<std::string>(),
               task["state"].get<std::string>(), reserved ? mib_string(reserved) : "-",
               mib_string(mem["in_use"].get<uint64_t>()), limit ? mib_string(limit) : "-",
               std::to_string(sm["request"].get<int>()) + "/" +
                   (sm_limit ? std::to_string(sm_limit) : std::string("-")),
               partition ? std::to_string(partition) + " " + sm["partition_kind"].get<std::string>()
                         : "-",
               std::to_string(task["stream_priority"].get<int>())});
    reasons.add_row({task["name"].get<std::string>(), task["reason"].get<std::string>()});
  }
  t.print(std::cout);
  std::cout << '\n';
  reasons.print(std::cout);
}

int cmd_tasks(const GlobalOptions& g, int32_t device_option, bool json) {
  RuntimePtr rt = open_runtime(g);
  const int32_t device = device_option >= 0 ? device_option : gk_device_default(rt.get());
  gk_device_props props{};
  props.struct_size = sizeof props;
  check(gk_device_get_props(rt.get(), device, &props), "gk_device_get_props");
  check(gk_memory_set_budget(rt.get(), device, kDemoBudget), "gk_memory_set_budget");
  const int32_t quarter = std::max(props.sm_count / 4, 1);
  const int32_t half = std::max(props.sm_count / 2, quarter);

  // 256 MiB budget: decode reserves 64 MiB, prefill 96 MiB; finetune's 128 MiB does not fit
  // the 96 MiB left, so it waits. batch-embed reserves nothing and uses what is unreserved.
  std::vector<DemoTask> demo;
  demo.push_back(start_demo_task(
      rt.get(), demo_spec("decode", device, GK_QOS_GUARANTEED, 64 * kMiB, 0, quarter, 0),
      8 * kMiB));
  demo.push_back(start_demo_task(
      rt.get(),
      demo_spec("prefill", device, GK_QOS_BURSTABLE, 96 * kMiB, 160 * kMiB, quarter, half),
      32 * kMiB));
  demo.push_back(start_demo_task(
      rt.get(), demo_spec("batch-embed", device, GK_QOS_BEST_EFFORT, 0, 0, 0, 0), 4 * kMiB));
  demo.push_back(start_demo_task(
      rt.get(), demo_spec("finetune", device, GK_QOS_GUARANTEED, 128 * kMiB, 0, quarter, 0),
      16 * kMiB));

  char* out = nullptr;
  check(gk_scheduler_json(rt.get(), &out), "gk_scheduler_json");
  GkString owned(out);
  const nlohmann::ordered_json view = nlohmann::ordered_json::parse(out);
  if (json) {
    std::cout << json_text(view, 2) << '\n';
  } else {
    print_tasks_table(view, demo);
  }
  // Tensors first, then streams (they wait for their work), then the tasks.
  for (auto& d : demo) d.tensors.clear();
  for (auto& d : demo) d.stream.reset();
  demo.clear();
  return 0;
}

// ---------------------------------------------------------------------------------------
// weights: a weight set's tensors, totals and metadata (gk_weights_*), in a table that fits
// 100 columns, or whole as JSON. --device / --dtype also load every tensor.
// ---------------------------------------------------------------------------------------

constexpr size_t kTableColumns = 100;

struct WeightsOptions {
  std::string path;
  std::string device;  // "" = list only
  std::string dtype;   // "" = as stored
  bool json = false;
};

struct WeightsDeleter {
  void operator()(gk_weights* w) const { gk_weights_close(w); }
};
using WeightsPtr = std::unique_ptr<gk_weights, WeightsDeleter>;

// One tensor as gk_weights_info describes it, its strings copied.
struct WeightRow {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::string file;
  uint64_t offset = 0;
};

// Display width as table.cpp counts it (code points).
size_t width_of(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The first `n` code points of `s`.
std::string first_points(const std::string& s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return s.substr(0, i);
}

// The last `n` code points of `s`.
std::string last_points(const std::string& s, size_t n) {
  const size_t total = width_of(s);
  if (n >= total) return s;
  size_t skip = total - n, i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == skip) break;
  }
  return s.substr(i);
}

// `s` cut to `width` columns: names keep their head and tail around "…" (the layer number
// and the tensor's role both matter); other text keeps its head.
std::string shorten(const std::string& s, size_t width, bool middle) {
  if (width_of(s) <= width) return s;
  if (width <= 1) return "…";
  if (!middle) return first_points(s, width - 1) + "…";
  const size_t tail = (width - 1) / 2 + (width - 1) % 2;
  return first_points(s, width - 1 - tail) + "…" + last_points(s, tail);
}

// Control characters (a chat template's newlines) as escapes, so a value stays on one line.
std::string one_line(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// 1023 → "1023 B", 1536 → "1.5 KiB", … 1024-based, one decimal.
std::string size_string(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

// The dtype's name; block-quantized ones included ("q4_k").
std::string dtype_string(int32_t dtype) {
  const char* name = gk_dtype_name(dtype);
  return name && *name ? name : "dtype " + std::to_string(dtype);
}

// A metadata value in a table cell: scalars as they are, short arrays inline, long ones
// (a tokenizer's vocabulary) as "array of N strings".
std::string metadata_cell(const nlohmann::ordered_json& v) {
  if (v.is_string()) return one_line(v.get<std::string>());
  if (v.is_object()) return "object of " + std::to_string(v.size()) + " keys";
  if (!v.is_array()) return json_text(v);
  const std::string inline_text = json_text(v);
  if (v.size() <= 8 && width_of(inline_text) <= 48) return one_line(inline_text);
  std::string kind = "values";
  bool all_strings = true, all_ints = true, all_numbers = true, all_bools = true, all_arrays = true;
  for (const auto& e : v) {
    all_strings &= e.is_string();
    all_ints &= e.is_number_integer();
    all_numbers &= e.is_number();
    all_bools &= e.is_boolean();
    all_arrays &= e.is_array();
  }
  if (all_strings) {
    kind = "strings";
  } else if (all_ints) {
    kind = "integers";
  } else if (all_numbers) {
    kind = "numbers";
  } else if (all_bools) {
    kind = "booleans";
  } else if (all_arrays) {
    kind = "arrays";
  }
  return "array of " + std::to_string(v.size()) + " " + kind;
}

// A device from "3", "cpu", "cuda" or "cuda:N".
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

bool is_floating(int32_t dtype) {
  return dtype == GK_DTYPE_F32 || dtype == GK_DTYPE_F64 || dtype == GK_DTYPE_F16 ||
         dtype == GK_DTYPE_BF16;
}

// Whether gk_weights_load converts a tensor stored as `stored` to `target`: floating-point
// dtypes to each other, block-quantized ones to f32, f16 and bf16; the others stay as
// stored.
bool converts(int32_t stored, int32_t target) {
  if (!target || stored == target) return false;
  if (is_floating(stored)) return true;
  return gk_dtype_block(stored, nullptr) > 1 && is_floating(target) && target != GK_DTYPE_F64;
}

// gk_weights_load's progress on a terminal: one line on stderr, redrawn at most ten times a
// second.
struct ProgressLine {
  std::string label;
  std::chrono::steady_clock::time_point last{};
  bool drawn = false;
};

void draw_progress(void* user_data, uint64_t done, uint64_t total) {
  auto* p = static_cast<ProgressLine*>(user_data);
  const auto now = std::chrono::steady_clock::now();
  if (done < total && p->drawn && now - p->last < std::chrono::milliseconds(100)) return;
  p->last = now;
  p->drawn = true;
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * 24);
  std::fprintf(stderr, "\r%s  [%s%s] %5.1f%%  %s / %s   ", p->label.c_str(),
               std::string(filled, '#').c_str(), std::string(24 - filled, '.').c_str(),
               frac * 100.0, size_string(done).c_str(), size_string(total).c_str());
  std::fflush(stderr);
}

struct LoadReport {
  int32_t device = 0;
  std::string device_text;
  int32_t dtype = 0;   // 0: as stored
  uint64_t bytes = 0;  // the loaded copies (or mappings)
  double seconds = 0;
};

// Makes every tensor available on the device as the dtype (gk_weights_load: what does not
// convert stays as stored) and measures it.
LoadReport load_all(gk_runtime* rt, gk_weights* w, const std::vector<WeightRow>& rows,
                    const WeightsOptions& o, const ProgressLine& progress) {
  LoadReport r;
  r.device = o.device.empty() ? gk_device_default(rt) : parse_device(rt, o.device);
  gk_device_props props{};
  props.struct_size = sizeof props;
  check(gk_device_get_props(rt, r.device, &props), "gk_device_get_props");
  r.device_text =
      std::to_string(r.device) + " (" + kind_string(props.kind) + ", " + props.name + ")";
  if (!o.dtype.empty()) {
    r.dtype = parse_dtype(o.dtype);
    if (r.dtype != GK_DTYPE_F32 && r.dtype != GK_DTYPE_F16 && r.dtype != GK_DTYPE_BF16 &&
        r.dtype != GK_DTYPE_F64) {
      throw std::invalid_argument("--dtype " + o.dtype + ": give f32, f16, bf16 or f64");
    }
  }
  for (const auto& row : rows) {
    if (converts(row.dtype, r.dtype)) {
      int64_t elements = 1;
      for (int64_t n : row.shape) elements *= n;
      r.bytes += static_cast<uint64_t>(elements) * gk_dtype_size(r.dtype);
    } else {
      r.bytes += row.bytes;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  check(gk_weights_load(w, r.device, r.dtype, nullptr), "gk_weights_load");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress.drawn) std::fputc('\n', stderr);
  return r;
}

void print_weights_table(const std::string& path, const std::string& format,
                         const std::vector<WeightRow>& rows, const nlohmann::ordered_json& metadata,
                         const LoadReport* loaded) {
  uint64_t total = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> by_dtype;             // name -> (count, bytes)
  std::vector<std::pair<std::string, std::pair<size_t, uint64_t>>> files;  // in order
  for (const auto& r : rows) {
    total += r.bytes;
    auto& d = by_dtype[dtype_string(r.dtype)];
    ++d.first;
    d.second += r.bytes;
    if (files.empty() || files.back().first != r.file) files.push_back({r.file, {0, 0}});
    ++files.back().second.first;
    files.back().second.second += r.bytes;
  }
  const std::string summary = ": " + format + ", " + std::to_string(rows.size()) + " tensors, " +
                              size_string(total) + " in " + std::to_string(files.size()) +
                              (files.size() == 1 ? " file" : " files");
  std::cout << shorten(path, kTableColumns - std::min(width_of(summary), kTableColumns / 2), true)
            << summary << "\n\n";

  // Columns: NAME (what is left of 100), DTYPE, SHAPE, BYTES, two spaces between.
  std::vector<std::array<std::string, 4>> cells;
  size_t dtype_w = 5, shape_w = 5, bytes_w = 5;
  for (const auto& r : rows) {
    std::array<std::string, 4> c = {r.name, dtype_string(r.dtype),
                                    shorten(shape_string(r.shape), 28, false),
                                    size_string(r.bytes)};
    dtype_w = std::max(dtype_w, width_of(c[1]));
    shape_w = std::max(shape_w, width_of(c[2]));
    bytes_w = std::max(bytes_w, width_of(c[3]));
    cells.push_back(std::move(c));
  }
  const size_t name_w = kTableColumns - (dtype_w + shape_w + bytes_w + 3 * 2);
  Table t({"NAME", "DTYPE", "SHAPE", "BYTES"});
  for (auto& c : cells) t.add_row({shorten(one_line(c[0]), name_w, true), c[1], c[2], c[3]});
  if (t.empty()) {
    std::cout << "(no tensors)\n";
  } else {
    t.print(std::cout);
  }

  std::cout << "\nTotals: " << rows.size() << " tensors, " << total << " bytes ("
            << size_string(total) << ")\n";
  Table dt({"DTYPE", "TENSORS", "BYTES"});
  for (const auto& [name, d] : by_dtype) {
    dt.add_row({name, std::to_string(d.first), size_string(d.second)});
  }
  if (!dt.empty()) dt.print(std::cout);
  if (files.size() > 1) {
    std::cout << "\nFiles\n";
    Table ft({"FILE", "TENSORS", "BYTES"});
    for (const auto& [file, f] : files) {
      ft.add_row({shorten(file, kTableColumns - 26, true), std::to_string(f.first),
                  size_string(f.second)});
    }
    ft.print(std::cout);
  }
  if (loaded) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2f s", loaded->seconds);
    const std::string tail = " as " +
                             (loaded->dtype ? dtype_string(loaded->dtype) : std::string("stored")) +
                             ": " + size_string(loaded->bytes) + " in " + seconds;
    const std::string head = "Loaded onto device ";
    std::cout << '\n'
              << head
              << shorten(loaded->device_text, kTableColumns - width_of(head) - width_of(tail),
                         false)
              << tail << '\n';
  }

  std::cout << "\nMetadata (" << metadata.size() << (metadata.size() == 1 ? " key" : " keys")
            << "; --json prints every value whole)\n";
  if (metadata.empty()) {
    std::cout << "(none)\n";
    return;
  }
  size_t key_w = 3;
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    key_w = std::max(key_w, width_of(one_line(it.key())));
  }
  key_w = std::min<size_t>(key_w, 44);
  const size_t value_w = kTableColumns - key_w - 2;
  Table mt({"KEY", "VALUE"});
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    mt.add_row({shorten(one_line(it.key()), key_w, true),
                shorten(metadata_cell(it.value()), value_w, false)});
  }
  mt.print(std::cout);
}

int cmd_weights(const GlobalOptions& g, const WeightsOptions& o) {
  RuntimePtr rt = open_runtime(g);
  ProgressLine progress;
  if (isatty(STDERR_FILENO) && (!o.device.empty() || !o.dtype.empty())) {
    const std::string base = o.path.substr(
        o.path.find_last_of('/') == std::string::npos ? 0 : o.path.find_last_of('/') + 1);
    progress.label = shorten(base.empty() ? o.path : base, 32, true);
  }
  gk_weights_options options{};
  options.struct_size = sizeof options;
  if (!progress.label.empty()) {
    options.progress = draw_progress;
    options.progress_user_data = &progress;
  }
  gk_weights* raw = nullptr;
  check(gk_weights_open(rt.get(), o.path.c_str(), &options, &raw), "gk_weights_open");
  WeightsPtr w(raw);

  std::vector<WeightRow> rows;
  const int64_t count = gk_weights_count(w.get());
  for (int64_t i = 0; i < count; ++i) {
    gk_weight_info info{};
    info.struct_size = sizeof info;
    check(gk_weights_info(w.get(), i, &info), "gk_weights_info");
    WeightRow r;
    r.name = str(info.name);
    r.dtype = info.dtype;
    r.shape.assign(info.shape, info.shape + std::clamp(info.ndim, 0, GK_MAX_DIMS));
    r.bytes = info.bytes;
    r.file = str(info.file);
    r.offset = info.file_offset;
    rows.push_back(std::move(r));
  }
  char* meta_text = nullptr;
  check(gk_weights_metadata_json(w.get(), &meta_text), "gk_weights_metadata_json");
  GkString meta_owned(meta_text);
  nlohmann::ordered_json metadata =
      nlohmann::ordered_json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  if (metadata.is_discarded()) {
    throw std::runtime_error("gk_weights_metadata_json returned text that is not JSON");
  }
  const std::string format = str(gk_weights_format(w.get()));

  std::unique_ptr<LoadReport> loaded;
  if (!o.device.empty() || !o.dtype.empty()) {
    loaded = std::make_unique<LoadReport>(load_all(rt.get(), w.get(), rows, o, progress));
  }

  if (!o.json) {
    print_weights_table(o.path, format, rows, metadata, loaded.get());
    return 0;
  }
  nlohmann::ordered_json j;
  j["path"] = o.path;
  j["format"] = format;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    tensors.push_back({{"name", r.name},
                       {"dtype", dtype_string(r.dtype)},
                       {"shape", r.shape},
                       {"bytes", r.bytes},
                       {"file", r.file},
                       {"offset", r.offset}});
  }
  j["tensors"] = std::move(tensors);
  j["metadata"] = std::move(metadata);
  if (loaded) {
    j["loaded"] = {{"device", loaded->device},
                   {"dtype", loaded->dtype ? dtype_string(loaded->dtype) : std::string("stored")},
                   {"bytes", loaded->bytes},
                   {"seconds", loaded->seconds}};
  }
  std::cout << json_text(j, 2) << '\n';
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{
      "gpukit — inspect a GPUkit runtime: devices, plugins, op dispatch, scheduler tasks and "
      "weight files"};
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
  explain->add_option("--out-dtype", e.out_dtype, "Output dtype of cast (its dtype attribute)");
  explain->add_option("--shape,-s", e.shapes,
                      "Input i's shape, e.g. 64x64, or dtype:shape (i32:8) for an input of "
                      "another dtype; one per input, in order");
  explain->add_option("--attr,-a", e.attrs,
                      "Attribute name=value: int, float, ints (1,2 or [1]), else text");
  explain->add_flag("--json", e.json, "Print gk_explain's JSON");

  bool tasks_json = false;
  int32_t tasks_device = -1;
  CLI::App* tasks = app.add_subcommand(
      "tasks",
      "Scheduler view (QoS, state, reason, memory, SM partition, stream priority) of a "
      "built-in demo: a Guaranteed, a Burstable, a BestEffort and a pending task under a "
      "256 MiB budget. Tasks belong to the process that made them, so this shows the "
      "demo's own tasks, not other processes'");
  tasks->add_option("--device,-d", tasks_device, "Device id (default: gk_device_default)");
  tasks->add_flag("--json", tasks_json, "Print gk_scheduler_json");

  WeightsOptions w;
  CLI::App* weights = app.add_subcommand(
      "weights",
      "The tensors (name, dtype, shape, bytes), totals and metadata of a weight set: a "
      ".safetensors file, a sharded checkpoint's index.json, a folder holding either, or a "
      ".gguf file. Nothing is read but the headers unless --device or --dtype asks to load "
      "every tensor");
  weights->add_option("path", w.path, "The weight file, index or folder")->required();
  weights->add_option("--device,-d", w.device,
                      "Load every tensor onto this device (an id, cpu, cuda or cuda:N) and "
                      "report the time");
  weights->add_option("--dtype,-t", w.dtype,
                      "Load every tensor as f32, f16, bf16 or f64 (block-quantized ones "
                      "dequantized; integer ones stay as stored)");
  weights->add_flag("--json", w.json,
                    "JSON: {path, format, tensors: [{name, dtype, shape, bytes, file, offset}], "
                    "metadata} (the metadata whole)");

  GenerateOptions gen;
  CLI::App* generate = app.add_subcommand(
      "generate",
      "Generates text with a decoder-only model (Llama, Mistral, Qwen2, Qwen3, SmolLM2, "
      "GPT-2): the text on stdout as it comes, then load time and prefill/decode speed on "
      "stderr");
  generate->add_option("--model,-m", gen.model,
                       "A .gguf file, or a folder with config.json, SafeTensors weights and "
                       "tokenizer.json")
      ->required();
  generate->add_option("--prompt,-p", gen.prompt, "The prompt text")->required();
  generate->add_option("--max-tokens,-n", gen.max_tokens, "The most tokens to generate (64)");
  generate->add_option("--device,-d", gen.device, "An id, cpu, cuda or cuda:N (default: best)");
  generate->add_option("--dtype,-t", gen.dtype, "f32, bf16 or f16 (f32)");
  generate->add_option("--temperature", gen.temperature, "0 (the default) is greedy");
  generate->add_option("--top-k", gen.top_k, "Keep the k most likely tokens (0: off)");
  generate->add_option("--top-p", gen.top_p, "Keep the smallest set of this probability (1)");
  generate->add_option("--min-p", gen.min_p, "Drop tokens below min_p x the top one's (0)");
  generate->add_option("--repetition-penalty", gen.repetition_penalty, "HF's (1: off)");
  generate->add_option("--seed", gen.seed, "The same seed gives the same text (0)");
  generate->add_flag("--chat", gen.chat,
                     "Send the prompt as a user turn of a ChatML conversation (SmolLM2, Qwen2 "
                     "instruct models)");

  TranscribeOptions tr;
  CLI::App* transcribe = app.add_subcommand(
      "transcribe",
      "Transcribes a sound file with a Whisper model: segments with their times on stdout as "
      "they come, then the audio length, time taken and RTFx on stderr");
  transcribe->add_option("file", tr.file, "A sound file (WAV, FLAC, Ogg, ...)")->required();
  transcribe->add_option("--model,-m", tr.model,
                         "An HF Whisper folder (config.json, model.safetensors, tokenizer.json, "
                         "generation_config.json)")
      ->required();
  transcribe->add_option("--device,-d", tr.device, "An id, cpu, cuda or cuda:N (default: best)");
  transcribe->add_option("--dtype,-t", tr.dtype, "f32, bf16 or f16 (f32)");
  transcribe->add_option("--language,-l", tr.language,
                         "A language code such as en (default: detected, or en for .en models)");
  transcribe->add_flag("--without-timestamps", tr.without_timestamps,
                       "One segment per 30 s window, no timestamp tokens");
  transcribe->add_flag("--json", tr.json,
                       "JSON: {text, language, duration, segments: [{start, end, text, "
                       "avg_logprob, no_speech_prob, tokens}]}");

  bool cache_clear = false, cache_json = false;
  CLI::App* cache = app.add_subcommand(
      "cache",
      "The disk cache of JIT-compiled kernels (NVRTC): folder, entries, size and limit");
  cache->add_flag("--clear", cache_clear, "Remove every entry first");
  cache->add_flag("--json", cache_json, "JSON: {dir, entries, bytes, limit_bytes[, removed]}");

  CLI11_PARSE(app, argc, argv);

  if (info->parsed()) return cmd_info(g, info_json);
  if (plugins->parsed()) return cmd_plugins(g, plugins_json_flag);
  if (explain->parsed()) return cmd_explain(g, e);
  if (tasks->parsed()) return cmd_tasks(g, tasks_device, tasks_json);
  if (weights->parsed()) return cmd_weights(g, w);
  if (cache->parsed()) return cmd_cache(cache_clear, cache_json);
  if (generate->parsed()) {
    RuntimePtr rt = open_runtime(g);
    const int32_t device =
        gen.device.empty() ? gk_device_default(rt.get()) : parse_device(rt.get(), gen.device);
    return cmd_generate(rt.get(), device, gen);
  }
  if (transcribe->parsed()) {
    RuntimePtr rt = open_runtime(g);
    const int32_t device =
        tr.device.empty() ? gk_device_default(rt.get()) : parse_device(rt.get(), tr.device);
    return cmd_transcribe(rt.get(), device, tr);
  }
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
