// The scheduler's views: gk_task_get_info's struct, a task's events and the whole scheduler
// as JSON (gk_task_events_json, gk_scheduler_json). The state machine is scheduler.cpp.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "device/device.h"
#include "memory/device_memory.h"
#include "scheduler/green_contexts.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_state.h"
#include "scheduler/sm_granules.h"

namespace gk {

gk_task_info Scheduler::info(Task& task) {
  MemoryOwner usage = memory_.pool(*task.device).owner_usage(task.owner);
  std::lock_guard<std::mutex> lock(mutex_);
  gk_task_info i{};
  i.state = task.state;
  i.qos = int32_t(task.spec.qos);
  i.device = task.device->id;
  i.priority = task.spec.priority;
  i.stream_priority = task.stream_priority;
  i.sm_partition = task.partition_sms;
  i.memory_reserved = task.state == GK_TASK_PENDING || task_state_terminal(task.state) ? 0 : task.reserved.memory;
  i.memory_in_use = usage.in_use;
  i.memory_peak = usage.peak;
  i.ops_launched = task.ops_launched;
  i.throttle_count = task.throttle_count;
  i.throttled_ns = task.throttled_ns;
  i.created_ns = task.created_ns;
  i.admitted_ns = task.admitted_ns;
  i.started_ns = task.started_ns;
  i.finished_ns = task.finished_ns;
  i.reason = task.reason.c_str();
  return i;
}

namespace {

nlohmann::ordered_json task_json(const Task& t, const MemoryOwner& usage) {
  nlohmann::ordered_json j;
  j["id"] = t.id;
  j["name"] = t.spec.name;
  j["device"] = t.device->id;
  j["qos"] = qos_name(t.spec.qos);
  j["priority"] = t.spec.priority;
  j["state"] = task_state_name(t.state);
  j["reason"] = t.reason;
  j["memory"] = {{"request", t.spec.memory_request},
                 {"limit", t.spec.qos == Qos::kGuaranteed ? t.spec.memory_request : t.spec.memory_limit},
                 {"in_use", usage.in_use},
                 {"peak", usage.peak}};
  j["sm"] = {{"request", t.spec.sm_request},
             {"limit", t.spec.sm_limit},
             {"reserved", t.reserved.sms},
             {"partition", t.partition_sms},
             {"partition_kind", t.partition_sms ? (t.exclusive ? "exclusive" : "shared") : "none"}};
  j["stream_priority"] = t.stream_priority;
  j["ops_launched"] = t.ops_launched;
  j["pacing"] = {{"throttle_count", t.throttle_count},
                 {"throttled_ns", t.throttled_ns},
                 {"inflight", t.inflight.size()}};
  j["times_ns"] = {{"created", t.created_ns},
                   {"admitted", t.admitted_ns},
                   {"started", t.started_ns},
                   {"finished", t.finished_ns}};
  return j;
}

}  // namespace

std::string Scheduler::events_json(Task& task) {
  MemoryPool& pool = memory_.pool(*task.device);
  MemoryOwner usage = pool.owner_usage(task.owner);
  std::vector<OwnerEvent> evictions = pool.owner_events(task.owner);
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::ordered_json j = task_json(task, usage);
  std::vector<TaskEvent> all(task.events.begin(), task.events.end());
  for (auto& e : evictions) all.push_back({e.t_ns, "eviction", e.text});
  std::stable_sort(all.begin(), all.end(),
                   [](const TaskEvent& a, const TaskEvent& b) { return a.t_ns < b.t_ns; });
  if (all.size() > kTaskEventLimit) all.erase(all.begin(), all.end() - kTaskEventLimit);
  j["events_dropped"] = task.events_dropped + usage.events_dropped;
  j["events"] = nlohmann::ordered_json::array();
  for (const auto& e : all) {
    j["events"].push_back({{"t_ns", e.t_ns}, {"kind", e.kind}, {"text", e.text}});
  }
  return json_text(j);
}

std::string Scheduler::json() {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : tasks_) {
      if (auto t = w.lock()) tasks.push_back(t);
    }
  }
  std::vector<MemoryOwner> usage;
  for (auto& t : tasks) usage.push_back(memory_.pool(*t->device).owner_usage(t->owner));
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::ordered_json j;
  j["devices"] = nlohmann::ordered_json::array();
  for (auto& slot : devices_) {
    if (!slot) continue;
    DeviceState& d = *slot;
    nlohmann::ordered_json dj;
    dj["device"] = d.device->id;
    dj["label"] = d.device->label();
    dj["memory_capacity"] = d.admission.memory_capacity();
    dj["memory_reserved"] = d.admission.memory_reserved();
    dj["sm_count"] = d.admission.sm_capacity();
    dj["sms_reserved"] = d.admission.sms_reserved();
    dj["stream_priorities"] = {{"least", d.least_priority}, {"greatest", d.greatest_priority}};
    if (d.granules) {
      dj["partitions"] = {{"available", true},
                          {"granule_sms", d.granules->granule_sms()},
                          {"granules", d.green->granules()},
                          {"exclusive_free", d.granules->exclusive_free()},
                          {"remainder_sms", d.green->remainder_sms()}};
    } else {
      dj["partitions"] = {{"available", false},
                          {"why", d.device->is_cuda() ? d.green->why()
                                                      : std::string("the cpu device has no SMs "
                                                                    "to partition")}};
    }
    dj["pacing"] = {{"best_effort_inflight", d.pacing.best_effort_inflight},
                    {"guaranteed_idle_us", d.pacing.guaranteed_idle_us},
                    {"max_hold_us", d.pacing.max_hold_us}};
    dj["pending"] = d.admission.pending();
    j["devices"].push_back(dj);
  }
  j["tasks"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < tasks.size(); ++i) j["tasks"].push_back(task_json(*tasks[i], usage[i]));
  return json_text(j);
}

}  // namespace gk
