// What scheduler.cpp (the state machine) and scheduler_views.cpp (its info and JSON views)
// share: a device's scheduling state, which task states are terminal, the event log's length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpukit/gpukit.h"
#include "scheduler/green_contexts.h"
#include "scheduler/scheduler.h"
#include "scheduler/sm_granules.h"

namespace gk {

struct Scheduler::DeviceState {
  const Device* device;
  Admission admission;
  PacingConfig pacing;
  std::unique_ptr<GreenContexts> green;    // CUDA devices
  std::unique_ptr<SmGranules> granules;    // when green contexts are available
  int least_priority = 0, greatest_priority = 0;
  std::vector<Task*> live;                 // non-terminal tasks
  std::vector<Task*> tasks;                // by id order, for lookups on admission
};

// A task keeps its latest this many events (older ones are counted as dropped).
constexpr size_t kTaskEventLimit = 256;

inline bool task_state_terminal(int32_t state) {
  return state == GK_TASK_COMPLETED || state == GK_TASK_FAILED || state == GK_TASK_CANCELLED;
}

}  // namespace gk
