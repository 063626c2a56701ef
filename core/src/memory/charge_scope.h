// The owner charged for allocations that name none, for the length of a scope on this
// thread: an op launched on a task's stream charges its outputs and the plugin's scratch
// (host services) to the task.
#pragma once

#include <atomic>

#include "common/thread_state.h"

namespace gk {

class ChargeScope {
 public:
  explicit ChargeScope(MemoryOwner* owner) : previous_(thread_state.charge_owner) {
    if (owner && !any_owner_.load(std::memory_order_relaxed)) {
      any_owner_.store(true, std::memory_order_relaxed);
    }
    thread_state.charge_owner = owner;
  }
  ~ChargeScope() { thread_state.charge_owner = previous_; }
  ChargeScope(const ChargeScope&) = delete;
  ChargeScope& operator=(const ChargeScope&) = delete;

  // The innermost scope's owner, nullptr outside any scope.
  static MemoryOwner* current() { return thread_state.charge_owner; }
  // The same, without the thread-local lookup (a call into the TLS resolver from a shared
  // library, and a few cache lines on a cold call) until some thread has opened a scope with
  // an owner. A thread's own scopes set the flag before it reads it, so relaxed order is enough.
  static MemoryOwner* current_if_any() {
    return any_owner_.load(std::memory_order_relaxed) ? thread_state.charge_owner : nullptr;
  }

 private:
  MemoryOwner* previous_;
  static inline constinit std::atomic<bool> any_owner_{false};  // a scope with an owner opened
};

}  // namespace gk
