#include "tasks.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "table.h"

namespace gk::cli {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kDemoBudget = 256 * kMiB;

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

}  // namespace

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


}  // namespace gk::cli
