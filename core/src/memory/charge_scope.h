// The owner charged for allocations that name none, for the length of a scope on this
// thread: an op launched on a task's stream charges its outputs and the plugin's scratch
// (host services) to the task.
#pragma once

namespace gk {

struct MemoryOwner;

class ChargeScope {
 public:
  explicit ChargeScope(MemoryOwner* owner) : previous_(current_) { current_ = owner; }
  ~ChargeScope() { current_ = previous_; }
  ChargeScope(const ChargeScope&) = delete;
  ChargeScope& operator=(const ChargeScope&) = delete;

  // The innermost scope's owner, nullptr outside any scope.
  static MemoryOwner* current() { return current_; }

 private:
  MemoryOwner* previous_;
  static inline thread_local MemoryOwner* current_ = nullptr;
};

}  // namespace gk
