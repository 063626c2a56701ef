// The owner charged for allocations that name none, for the length of a scope on this
// thread: an op launched on a task's stream charges its outputs and the plugin's scratch
// (host services) to the task.
#pragma once

#include "common/thread_state.h"

namespace gk {

class ChargeScope {
 public:
  explicit ChargeScope(MemoryOwner* owner) : previous_(thread_state.charge_owner) {
    thread_state.charge_owner = owner;
  }
  ~ChargeScope() { thread_state.charge_owner = previous_; }
  ChargeScope(const ChargeScope&) = delete;
  ChargeScope& operator=(const ChargeScope&) = delete;

  // The innermost scope's owner, nullptr outside any scope.
  static MemoryOwner* current() { return thread_state.charge_owner; }

 private:
  MemoryOwner* previous_;
};

}  // namespace gk
