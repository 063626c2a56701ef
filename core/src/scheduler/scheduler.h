// The scheduler: tasks with a QoS class, admission per device, the task state machine,
// memory reservation (through the pool's owners), stream priorities, SM partitions and
// pacing. Every decision is recorded as an event with its reason.
//
// States: Pending → Admitted → Running ⇄ Throttled, and any non-terminal state →
// Completed (from Running only) | Failed | Cancelled. transition() is the one place a
// state changes, and it refuses anything else.
//
// Thread-safe: one mutex guards every task and device; it is taken before a pool's mutex,
// never after, and never held while a pacing wait sleeps.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpukit/gpukit.h"
#include "memory/memory_pool.h"
#include "scheduler/admission.h"
#include "scheduler/pacer.h"

namespace gk {

struct Device;
class DeviceMemory;
class DeviceSet;
class GreenContexts;
class Logger;
class SmGranules;

struct TaskSpec {
  std::string name;
  int32_t device = 0;
  Qos qos = Qos::kBestEffort;
  int32_t priority = 0;
  uint64_t memory_request = 0;
  uint64_t memory_limit = 0;
  int32_t sm_request = 0;
  int32_t sm_limit = 0;
};

struct TaskEvent {
  uint64_t t_ns;
  std::string kind;  // "state", "eviction", "pacing", "partition"
  std::string text;
};

const char* task_state_name(int32_t state);

// One task. Fields below `owner` are guarded by the scheduler's mutex.
struct Task {
  uint64_t id = 0;
  TaskSpec spec;
  const Device* device = nullptr;
  Requests reserved;               // what admission reserves (SMs rounded to granules)
  MemoryOwner* owner = nullptr;    // in the device's pool
  int32_t stream_priority = 0;

  int32_t state = GK_TASK_PENDING;
  std::string reason;
  uint64_t created_ns = 0, admitted_ns = 0, started_ns = 0, finished_ns = 0;
  std::deque<TaskEvent> events;
  uint64_t events_dropped = 0;
  uint64_t ops_launched = 0, throttle_count = 0, throttled_ns = 0;
  // SM partition: granules held, and the green context (destroyed with the task, after
  // its last stream).
  std::vector<int> granules;
  bool exclusive = false;
  void* green_context = nullptr;
  int32_t partition_sms = 0;
  // Ops in flight on the GPU, oldest first (events recorded after each launch).
  std::deque<void*> inflight;
  std::vector<void*> spare_events;
  uint64_t last_launch_ns = 0;
  int32_t streams = 0;
  std::vector<gk_buffer*> buffers;  // allocated for it: freed when it is cancelled
  size_t buffers_prune_at = 64;

  // Driver objects go with the task (after its last stream): events, green context.
  const cuda::Driver* driver = nullptr;
  GreenContexts* green_contexts = nullptr;
  ~Task();
};

// Uses the devices (ids, the driver), their pools (task owners, budgets) and the logger; all
// three outlive it (the runtime makes them first and destroys them last).
class Scheduler {
 public:
  Scheduler(const DeviceSet& devices, const DeviceMemory& memory, const Logger& logger);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Validates the spec (INVALID_ARGUMENT), rejects what can never fit
  // (RESOURCE_EXHAUSTED), else admits or queues the task.
  std::shared_ptr<Task> submit(const TaskSpec& spec);
  // Blocks until the task leaves Pending or the timeout passes; returns its state.
  int32_t wait(Task& task, int64_t timeout_ms);
  // The one place a state changes: FAILED_PRECONDITION naming both states when `to` is
  // not legal from the task's state. Leaving for a terminal state releases the task's
  // reservations and partition (and, for Cancelled, the memory allocated for it).
  void transition(Task& task, int32_t to, const std::string& reason);
  // Waits for the work on the task's streams, then Running → Completed.
  void complete(Task& task);
  // Cancels a non-terminal task; called by gk_task_destroy.
  void retire(Task& task);

  // A stream owned by the task (priority from its class, on its partition if any).
  cuda::CUstream create_stream(Task& task);
  void stream_destroyed(Task& task);
  // Around every op on a task's stream: state checks, Admitted → Running, pacing (may
  // block a BestEffort caller, Throttled meanwhile); then the in-flight record.
  void before_launch(Task& task);
  void after_launch(Task& task, cuda::CUstream stream);
  // A buffer allocated for the task: freed if the task is cancelled.
  void charge_buffer(Task& task, gk_buffer* buffer);

  gk_task_info info(Task& task);  // reason points into the task
  std::string events_json(Task& task);
  std::string json();
  void set_pacing(const Device& device, const PacingConfig& pacing);
  // The device budget changed: re-reads the capacity and admits what now fits.
  void capacity_changed(const Device& device);
  // Tests inject a clock (nanoseconds, monotonic); the default is steady_clock.
  void set_clock(std::function<uint64_t()> clock);

 private:
  struct DeviceState;
  DeviceState& device_state(const Device& device);  // mutex held
  uint64_t now() const;
  void record(Task& task, const std::string& kind, std::string text);  // mutex held
  void set_state(Task& task, int32_t to, const std::string& reason);   // mutex held
  void release(Task& task, int32_t terminal);                          // mutex held
  void admitted(Task& task, const std::string& reason);                // mutex held
  void take_partition(Task& task, DeviceState& d);                     // mutex held
  void refresh_capacity(DeviceState& d);                               // mutex held
  int32_t inflight(Task& task);                                        // mutex held
  void drain(Task& task);  // waits for its in-flight work, mutex not held

  const DeviceSet& device_set_;
  const DeviceMemory& memory_;
  const Logger& logger_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<DeviceState>> devices_;  // by device id, made on first use
  std::vector<std::weak_ptr<Task>> tasks_;             // for json(), in creation order
  uint64_t next_id_ = 1;
  std::function<uint64_t()> clock_;
};

}  // namespace gk
