// gpukit — command-line view of a GPUkit runtime: versions, devices, plugins, dispatch and the
// scheduler (on a demo of its own: tasks belong to the process that made them).
//
//   gpukit info [--json]
//   gpukit plugins [--json]
//   gpukit explain OP [--device N] [--dtype T] [--shape 64x64 ...] [--attr k=v ...] [--json]
//   gpukit tasks [--device N] [--json]
//
// A client of the C ABI (gpukit.h) only. On failure it prints the status and
// gk_last_error() to stderr and exits non-zero.
#include <gpukit/gpukit.h>

#include <CLI/CLI.hpp>
#include <algorithm>
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

// JSON as text; bytes that are not UTF-8 (a name from a manifest, say) become U+FFFD
// instead of failing the whole view.
template <typename Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

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
    std::cout << json_text(plugins_json(plugins), 2) << '\n';
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
    std::cout << (j.is_discarded() ? std::string(out) : json_text(j, 2)) << '\n';
    return 0;
  }

  auto text = [](const nlohmann::json& v) -> std::string {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "-";
    return json_text(v);
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
    std::cout << "Device " << d["device"].get<int>() << " (" << d["label"].get<std::string>()
              << "): memory " << mib_string(d["memory_reserved"].get<uint64_t>()) << " reserved of "
              << mib_string(d["memory_capacity"].get<uint64_t>()) << " (the demo's budget); SMs "
              << d["sms_reserved"].get<int>() << " reserved of " << d["sm_count"].get<int>()
              << "; stream priorities " << d["stream_priorities"]["least"].get<int>()
              << " (least) .. " << d["stream_priorities"]["greatest"].get<int>() << " (greatest)\n";
    const auto& p = d["partitions"];
    if (p["available"].get<bool>()) {
      std::cout << "SM partitions: " << p["granules"].get<int>() << " granules of "
                << p["granule_sms"].get<int>() << " SMs (+" << p["remainder_sms"].get<int>()
                << " remainder), " << p["exclusive_free"].get<int>() << " not held exclusively\n";
    } else {
      std::cout << "SM partitions: none (" << p["why"].get<std::string>() << ")\n";
    }
    const auto& pacing = d["pacing"];
    std::cout << "BestEffort pacing: " << pacing["best_effort_inflight"].get<int>()
              << " op(s) in flight while Guaranteed work is busy (idle after "
              << pacing["guaranteed_idle_us"].get<uint32_t>() << " us, hold at most "
              << pacing["max_hold_us"].get<uint32_t>() << " us)\n\n";
  }
  Table t({"NAME", "QOS", "STATE", "MEM RESERVED", "MEM IN USE", "MEM LIMIT", "SMS REQ/LIMIT",
           "SM PARTITION", "STREAM PRIO", "REASON"});
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
               std::to_string(task["stream_priority"].get<int>()),
               task["reason"].get<std::string>()});
  }
  t.print(std::cout);
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

int run(int argc, char** argv) {
  CLI::App app{
      "gpukit — inspect a GPUkit runtime: devices, plugins, op dispatch and scheduler tasks"};
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

  CLI11_PARSE(app, argc, argv);

  if (info->parsed()) return cmd_info(g, info_json);
  if (plugins->parsed()) return cmd_plugins(g, plugins_json_flag);
  if (explain->parsed()) return cmd_explain(g, e);
  if (tasks->parsed()) return cmd_tasks(g, tasks_device, tasks_json);
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
