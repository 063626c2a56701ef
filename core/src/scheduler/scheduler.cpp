#include "common/json_text.h"
#include "scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "device/device.h"
#include "memory/buffer_table.h"
#include "memory/device_memory.h"
#include "scheduler/green_contexts.h"
#include "scheduler/scheduler_state.h"
#include "scheduler/sm_granules.h"

namespace gk {

namespace {

constexpr size_t kNameLimit = 128;

// The legal moves of the state machine (see scheduler.h).
bool legal(int32_t from, int32_t to) {
  switch (from) {
    case GK_TASK_PENDING: return to == GK_TASK_ADMITTED || to == GK_TASK_FAILED ||
                                 to == GK_TASK_CANCELLED;
    case GK_TASK_ADMITTED: return to == GK_TASK_RUNNING || to == GK_TASK_FAILED ||
                                  to == GK_TASK_CANCELLED;
    case GK_TASK_RUNNING: return to == GK_TASK_THROTTLED || to == GK_TASK_COMPLETED ||
                                 to == GK_TASK_FAILED || to == GK_TASK_CANCELLED;
    case GK_TASK_THROTTLED: return to == GK_TASK_RUNNING || to == GK_TASK_FAILED ||
                                   to == GK_TASK_CANCELLED;
    default: return false;  // terminal
  }
}

int32_t eviction_class_of(Qos qos) {
  switch (qos) {
    case Qos::kGuaranteed: return kEvictNever;
    case Qos::kBurstable: return kEvictAboveRequest;
    case Qos::kBestEffort: return kEvictFirst;
  }
  return kEvictFirst;
}

void check_spec(const TaskSpec& s, const Device& device) {
  const std::string who = std::string(qos_name(s.qos)) + " task '" + s.name + "'";
  auto bad = [&](const std::string& what) { fail(GK_INVALID_ARGUMENT, "gk_task_create: " + what); };
  if (s.name.empty()) bad("the task needs a name");
  if (s.name.size() > kNameLimit) bad("task name longer than 128 characters");
  if (s.sm_request < 0 || s.sm_limit < 0) bad(who + ": SM counts must not be negative");
  if (s.sm_limit > device.sm_count) {
    bad(who + ": sm_limit " + std::to_string(s.sm_limit) + " exceeds the " +
        std::to_string(device.sm_count) + " SMs of " + device.label());
  }
  switch (s.qos) {
    case Qos::kGuaranteed:
      if (s.memory_request == 0 && s.sm_request == 0) {
        bad(who + " requests nothing: give memory_request or sm_request, or use BestEffort");
      }
      if (s.memory_limit != 0 && s.memory_limit != s.memory_request) {
        bad(who + ": memory_limit " + human_bytes(s.memory_limit) + " differs from memory_request " +
            human_bytes(s.memory_request) + " (Guaranteed means requests = limits; use Burstable)");
      }
      if (s.sm_limit != 0 && s.sm_limit != s.sm_request) {
        bad(who + ": sm_limit " + std::to_string(s.sm_limit) + " differs from sm_request " +
            std::to_string(s.sm_request) + " (Guaranteed means requests = limits; use Burstable)");
      }
      break;
    case Qos::kBurstable:
      if (s.memory_request == 0 && s.sm_request == 0) {
        bad(who + " requests nothing: give memory_request or sm_request, or use BestEffort");
      }
      if (s.memory_limit != 0 && s.memory_limit < s.memory_request) {
        bad(who + ": memory_limit " + human_bytes(s.memory_limit) + " is below memory_request " +
            human_bytes(s.memory_request));
      }
      if (s.sm_limit != 0 && s.sm_limit < s.sm_request) {
        bad(who + ": sm_limit " + std::to_string(s.sm_limit) + " is below sm_request " +
            std::to_string(s.sm_request));
      }
      break;
    case Qos::kBestEffort:
      if (s.memory_request != 0 || s.sm_request != 0) {
        bad(who + " has a request (memory " + human_bytes(s.memory_request) + ", SMs " +
            std::to_string(s.sm_request) + "): BestEffort tasks request nothing; use Burstable");
      }
      break;
    default:
      bad("qos " + std::to_string(int(s.qos)) + " is not a gk_qos value");
  }
}

}  // namespace

const char* task_state_name(int32_t state) {
  switch (state) {
    case GK_TASK_PENDING: return "Pending";
    case GK_TASK_ADMITTED: return "Admitted";
    case GK_TASK_RUNNING: return "Running";
    case GK_TASK_THROTTLED: return "Throttled";
    case GK_TASK_COMPLETED: return "Completed";
    case GK_TASK_FAILED: return "Failed";
    case GK_TASK_CANCELLED: return "Cancelled";
  }
  return "unknown";
}

Task::~Task() {
  if (!driver) return;
  const auto& api = driver->api();
  if (api.cuCtxPushCurrent(device->context) != cuda::kSuccess) return;
  for (void* e : inflight) api.cuEventDestroy(static_cast<cuda::CUevent>(e));
  for (void* e : spare_events) api.cuEventDestroy(static_cast<cuda::CUevent>(e));
  cuda::CUcontext popped;
  api.cuCtxPopCurrent(&popped);
  if (green_contexts) green_contexts->destroy(green_context);
}

Scheduler::Scheduler(const DeviceSet& devices, const DeviceMemory& memory, const Logger& logger)
    : device_set_(devices), memory_(memory), logger_(logger) {
  devices_.resize(devices.devices().size());
}

Scheduler::~Scheduler() = default;

uint64_t Scheduler::now() const {
  if (clock_) return clock_();
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

void Scheduler::set_clock(std::function<uint64_t()> clock) {
  std::lock_guard<std::mutex> lock(mutex_);
  clock_ = std::move(clock);
}

void Scheduler::refresh_capacity(DeviceState& d) {
  // The device budget, when set, is the capacity tasks are admitted against.
  uint64_t budget = memory_.pool(*d.device).stats().budget;
  uint64_t capacity = budget ? budget : d.device->total_memory;
  if (capacity == d.admission.memory_capacity()) return;
  for (const auto& a : d.admission.set_memory_capacity(capacity)) {
    for (Task* t : d.tasks) {
      if (t->id == a.id) admitted(*t, a.reason);
    }
  }
}

Scheduler::DeviceState& Scheduler::device_state(const Device& device) {
  auto& slot = devices_[size_t(device.id)];
  if (!slot) {
    slot.reset(new DeviceState{&device, Admission(0, std::max(device.sm_count, 1)), {}, nullptr,
                               nullptr, 0, 0, {}, {}});
    if (device.is_cuda()) {
      const cuda::Driver& driver = *device_set_.driver();
      cuda::ContextGuard guard(driver, device.context);
      GK_CU_CHECK(driver, cuCtxGetStreamPriorityRange(&slot->least_priority,
                                                      &slot->greatest_priority));
      slot->green = std::make_unique<GreenContexts>(driver, device);
      if (slot->green->available()) {
        slot->granules = std::make_unique<SmGranules>(
            slot->green->granules(), slot->green->granule_sms(), slot->green->remainder_sms());
      } else {
        logger_.log(GK_LOG_INFO, device.label() + ": no SM partitions (" + slot->green->why() +
                                     "); tasks get stream priorities only");
      }
    }
  }
  refresh_capacity(*slot);
  return *slot;
}

void Scheduler::record(Task& task, const std::string& kind, std::string text) {
  if (task.events.size() == kTaskEventLimit) {
    task.events.pop_front();
    ++task.events_dropped;
  }
  task.events.push_back({now(), kind, std::move(text)});
}

void Scheduler::set_state(Task& task, int32_t to, const std::string& reason) {
  record(task, "state",
         std::string(task_state_name(task.state)) + " -> " + task_state_name(to) + ": " + reason);
  task.state = to;
  task.reason = reason;
  changed_.notify_all();
}

void Scheduler::admitted(Task& task, const std::string& reason) {
  set_state(task, GK_TASK_ADMITTED, reason);
  task.admitted_ns = now();
  memory_.pool(*task.device)
      .set_owner_class(task.owner, eviction_class_of(task.spec.qos), task.reserved.memory);
  take_partition(task, *devices_[size_t(task.device->id)]);
}

void Scheduler::take_partition(Task& task, DeviceState& d) {
  const TaskSpec& s = task.spec;
  bool best_effort_like = s.qos == Qos::kBestEffort || s.sm_request == 0;
  bool exclusive_exists = d.granules && d.granules->exclusive_free() < d.green->granules();
  bool wants = s.sm_request > 0 || s.sm_limit > 0 || (best_effort_like && exclusive_exists);
  if (!wants) return;
  if (!d.device->is_cuda()) {
    record(task, "partition", "no SM partition: the cpu device has none; the SM request is "
                              "reserved and accounted only");
    return;
  }
  if (!d.granules) {
    record(task, "partition", "no SM partition: " + d.green->why() + "; stream priority " +
                                  std::to_string(task.stream_priority) + " only");
    return;
  }
  std::string note;
  if (!best_effort_like) {
    int32_t count = d.granules->granules_for(s.sm_request);
    if (count > d.green->granules()) {
      record(task, "partition", "no SM partition: " + std::to_string(s.sm_request) +
                                    " SMs need " + std::to_string(count) + " granules of " +
                                    std::to_string(d.granules->granule_sms()) + " but the split has " +
                                    std::to_string(d.green->granules()) + "; stream priority only");
      return;
    }
    task.granules = d.granules->take_exclusive(count, &note);
    task.exclusive = true;
  } else {
    int32_t limit = s.sm_limit > 0 ? s.sm_limit : d.device->sm_count;
    task.granules = d.granules->take_shared(d.granules->granules_for(limit));
  }
  if (task.granules.empty()) {
    record(task, "partition", "no SM partition: every granule is held exclusively by other "
                              "tasks; stream priority only");
    return;
  }
  try {
    task.green_context = d.green->create(task.granules);
    task.green_contexts = d.green.get();
    task.partition_sms = d.granules->sms_of(task.granules);
  } catch (const Error& e) {
    d.granules->give_back(task.granules, task.exclusive);
    task.granules.clear();
    record(task, "partition", std::string("no SM partition: ") + e.what() +
                                  "; stream priority only");
    return;
  }
  std::string text = std::string(task.exclusive ? "exclusive" : "shared") + " partition of " +
                     std::to_string(task.partition_sms) + " SMs (" +
                     std::to_string(task.granules.size()) + " granule(s) of " +
                     std::to_string(d.granules->granule_sms()) + ")";
  if (!note.empty()) text += "; " + note;
  if (task.exclusive) {
    for (Task* other : d.live) {
      if (other != &task && !other->green_context && other->streams > 0) {
        text += "; task '" + other->spec.name + "' has streams on all SMs and may use these";
      }
    }
  }
  record(task, "partition", text);
}

std::shared_ptr<Task> Scheduler::submit(const TaskSpec& spec) {
  const Device& device = device_set_.at(spec.device);
  check_spec(spec, device);
  std::unique_lock<std::mutex> lock(mutex_);
  DeviceState& d = device_state(device);
  auto task = std::make_shared<Task>();
  task->id = next_id_++;
  task->spec = spec;
  task->device = &device;
  task->created_ns = now();
  if (device.is_cuda()) task->driver = device_set_.driver();
  task->reserved.memory = spec.qos == Qos::kBestEffort ? 0 : spec.memory_request;
  task->reserved.sms = spec.sm_request;
  if (d.granules && spec.sm_request > 0) {
    task->reserved.sms = std::min(d.granules->granules_for(spec.sm_request) *
                                      d.granules->granule_sms(),
                                  std::max(device.sm_count, 1));
  }
  switch (spec.qos) {
    case Qos::kGuaranteed: task->stream_priority = d.greatest_priority; break;
    case Qos::kBurstable: task->stream_priority = (d.least_priority + d.greatest_priority) / 2; break;
    case Qos::kBestEffort: task->stream_priority = d.least_priority; break;
  }
  uint64_t quota = spec.qos == Qos::kGuaranteed ? spec.memory_request : spec.memory_limit;
  Admission::Decision decision =
      d.admission.submit({task->id, spec.name, spec.qos, spec.priority, task->reserved});
  if (decision.verdict == Admission::Verdict::kRejected) {
    fail(GK_RESOURCE_EXHAUSTED, "gk_task_create: " + std::string(qos_name(spec.qos)) + " task '" +
                                    spec.name + "' on " + device.label() + " " + decision.reason);
  }
  MemoryPool& pool = memory_.pool(device);
  task->owner = pool.create_owner("task:" + spec.name, quota);
  pool.set_owner_class(task->owner, eviction_class_of(spec.qos), 0);
  record(*task, "state", std::string("created: ") + qos_name(spec.qos) + ", priority " +
                             std::to_string(spec.priority) + ", stream priority " +
                             std::to_string(task->stream_priority));
  task->reason = decision.reason;
  d.live.push_back(task.get());
  d.tasks.push_back(task.get());
  tasks_.push_back(task);
  if (decision.verdict == Admission::Verdict::kAdmitted) {
    admitted(*task, decision.reason);
  } else {
    record(*task, "state", decision.reason);
  }
  return task;
}

int32_t Scheduler::wait(Task& task, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto left_pending = [&] { return task.state != GK_TASK_PENDING; };
  if (timeout_ms < 0) {
    changed_.wait(lock, left_pending);
  } else {
    changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), left_pending);
  }
  return task.state;
}

void Scheduler::transition(Task& task, int32_t to, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!legal(task.state, to)) {
    fail(GK_FAILED_PRECONDITION, "task '" + task.spec.name + "': cannot go from " +
                                     task_state_name(task.state) + " to " + task_state_name(to));
  }
  if (to == GK_TASK_RUNNING && task.state == GK_TASK_ADMITTED) task.started_ns = now();
  if (task_state_terminal(to)) release(task, to);
  set_state(task, to, reason);
}

void Scheduler::release(Task& task, int32_t terminal_state) {
  DeviceState& d = *devices_[size_t(task.device->id)];
  task.finished_ns = now();
  d.live.erase(std::remove(d.live.begin(), d.live.end(), &task), d.live.end());
  MemoryPool& pool = memory_.pool(*task.device);
  pool.set_owner_class(task.owner, eviction_class_of(task.spec.qos), 0);
  if (d.granules && !task.granules.empty()) {
    d.granules->give_back(task.granules, task.exclusive);
    task.granules.clear();
  }
  if (terminal_state == GK_TASK_CANCELLED) {
    // Its buffers go (their handles become stale); memory still viewed by tensors returns
    // when they are released.
    int freed = 0;
    for (gk_buffer* b : task.buffers) {
      try {
        BufferTable::instance().remove(b, "gk_task_cancel");
        ++freed;
      } catch (const Error& e) {
        if (e.status() == GK_FAILED_PRECONDITION) {
          record(task, "state", std::string("buffer kept on cancel: ") + e.what());
        }
      }
    }
    task.buffers.clear();
    if (freed) record(task, "state", "cancel freed " + std::to_string(freed) + " buffer(s)");
  }
  for (const auto& a : d.admission.release(task.id)) {
    for (Task* t : d.tasks) {
      if (t->id == a.id) admitted(*t, a.reason + " (after '" + task.spec.name + "' released)");
    }
  }
}

void Scheduler::drain(Task& task) {
  // Waits for every op launched on the task's streams (the events after each).
  std::vector<void*> events;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events.assign(task.inflight.begin(), task.inflight.end());
  }
  if (!task.driver || events.empty()) return;
  cuda::ContextGuard guard(*task.driver, task.device->context);
  for (void* e : events) {
    GK_CU_CHECK(*task.driver, cuEventSynchronize(static_cast<cuda::CUevent>(e)));
  }
}

void Scheduler::complete(Task& task) {
  drain(task);
  transition(task, GK_TASK_COMPLETED, "completed");
}

void Scheduler::retire(Task& task) {
  bool active;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active = !task_state_terminal(task.state);
  }
  if (active) {
    drain(task);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!task_state_terminal(task.state)) {
      release(task, GK_TASK_CANCELLED);
      set_state(task, GK_TASK_CANCELLED, "cancelled: its handle was destroyed");
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& d = *devices_[size_t(task.device->id)];
  d.tasks.erase(std::remove(d.tasks.begin(), d.tasks.end(), &task), d.tasks.end());
  tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(),
                              [&](const std::weak_ptr<Task>& w) {
                                auto t = w.lock();
                                return !t || t.get() == &task;
                              }),
               tasks_.end());
  memory_.pool(*task.device).close_owner(task.owner);
}

void Scheduler::charge_buffer(Task& task, gk_buffer* buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (task.buffers.size() >= task.buffers_prune_at) {
    // Forget the buffers freed since, so a long task's list stays as long as its live set.
    auto freed = [](gk_buffer* b) {
      try {
        BufferTable::instance().with(b, "prune", [](BufferEntry&) {});
        return false;
      } catch (const Error&) {
        return true;
      }
    };
    task.buffers.erase(std::remove_if(task.buffers.begin(), task.buffers.end(), freed),
                       task.buffers.end());
    task.buffers_prune_at = std::max<size_t>(64, task.buffers.size() * 2);
  }
  task.buffers.push_back(buffer);
}

cuda::CUstream Scheduler::create_stream(Task& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (task.state == GK_TASK_PENDING || task_state_terminal(task.state)) {
    fail(GK_FAILED_PRECONDITION, "gk_task_stream_create: task '" + task.spec.name + "' is " +
                                     task_state_name(task.state) + " (" + task.reason +
                                     "); streams are made for admitted tasks");
  }
  cuda::CUstream stream = nullptr;
  if (task.device->is_cuda()) {
    const cuda::Driver& driver = *task.driver;
    cuda::ContextGuard guard(driver, task.device->context);
    if (task.green_context) {
      stream = task.green_contexts->create_stream(task.green_context, task.stream_priority);
    } else {
      GK_CU_CHECK(driver, cuStreamCreateWithPriority(&stream, cuda::kStreamNonBlocking,
                                                     task.stream_priority));
    }
  }
  ++task.streams;
  return stream;
}

void Scheduler::stream_destroyed(Task& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  --task.streams;
}

int32_t Scheduler::inflight(Task& task) {
  // Retire the completed ops from the front; their events are reused.
  while (!task.inflight.empty()) {
    auto e = static_cast<cuda::CUevent>(task.inflight.front());
    if (task.driver->api().cuEventQuery(e) != cuda::kSuccess) break;
    task.inflight.pop_front();
    task.spare_events.push_back(e);
  }
  return int32_t(task.inflight.size());
}

void Scheduler::before_launch(Task& task) {
  uint64_t held_since = 0;
  bool throttled = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (task.state == GK_TASK_PENDING || task_state_terminal(task.state)) {
        fail(GK_FAILED_PRECONDITION, "task '" + task.spec.name + "' is " +
                                         task_state_name(task.state) + " (" + task.reason +
                                         "): it cannot launch work");
      }
      if (task.state == GK_TASK_ADMITTED) {
        task.started_ns = now();
        set_state(task, GK_TASK_RUNNING, "running: first op launched");
      }
      DeviceState& d = *devices_[size_t(task.device->id)];
      PacingDecision decision;
      if (task.spec.qos == Qos::kBestEffort && task.driver) {
        PacingView view;
        view.now_ns = now();
        for (Task* g : d.live) {
          if (g->spec.qos != Qos::kGuaranteed) continue;
          view.guaranteed_inflight += inflight(*g);
          view.guaranteed_last_launch_ns = std::max(view.guaranteed_last_launch_ns,
                                                    g->last_launch_ns);
        }
        view.own_inflight = inflight(task);
        view.held_since_ns = held_since;
        decision = pace_best_effort(d.pacing, view);
        if (!decision.go && !held_since) held_since = view.now_ns;
      }
      if (decision.go) {
        if (throttled) {
          uint64_t held = now() - held_since;
          task.throttled_ns += held;
          if (task.state == GK_TASK_THROTTLED) {
            task.state = GK_TASK_RUNNING;  // a pacing release: counted, not logged each time
            task.reason = "running: pacing released";
          }
        }
        return;
      }
      if (!throttled) {
        throttled = true;
        ++task.throttle_count;
        // Log the first hold and then every 1000th, so a long run keeps its history.
        if (task.throttle_count == 1 || task.throttle_count % 1000 == 0) {
          set_state(task, GK_TASK_THROTTLED, decision.reason);
        } else {
          task.state = GK_TASK_THROTTLED;
          task.reason = decision.reason;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
}

void Scheduler::after_launch(Task& task, cuda::CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++task.ops_launched;
  task.last_launch_ns = now();
  if (!task.driver) return;  // the cpu device runs ops to completion in the call
  const cuda::Driver& driver = *task.driver;
  cuda::ContextGuard guard(driver, task.device->context);
  cuda::CUevent e = nullptr;
  if (!task.spare_events.empty()) {
    e = static_cast<cuda::CUevent>(task.spare_events.back());
    task.spare_events.pop_back();
  } else {
    GK_CU_CHECK(driver, cuEventCreate(&e, cuda::kEventDisableTiming));
  }
  cuda::CUresult r = driver.api().cuEventRecord(e, stream);
  if (r != cuda::kSuccess) {
    task.spare_events.push_back(e);
    cuda::check(driver, r, "cuEventRecord", __FILE__, __LINE__);
  }
  task.inflight.push_back(e);
}


void Scheduler::capacity_changed(const Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto& slot = devices_[size_t(device.id)]) refresh_capacity(*slot);
}

void Scheduler::set_pacing(const Device& device, const PacingConfig& pacing) {
  if (pacing.best_effort_inflight < 0) {
    fail(GK_INVALID_ARGUMENT, "gk_scheduler_set_pacing: best_effort_inflight " +
                                  std::to_string(pacing.best_effort_inflight) + " is negative");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  device_state(device).pacing = pacing;
}

}  // namespace gk
